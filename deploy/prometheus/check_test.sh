#!/usr/bin/env bash
# ctest `prometheus_config_check`: the shipped Prometheus files pass promtool.
#   1. deploy/prometheus_config.sh renders deploy/prometheus.yml (raw token and bootstrap JSON)
#      and `promtool check config` accepts the result, rules included; jobs' series are scraped
#      with the scrape secret, never with the admin token, and no target's labels are honoured;
#   2. the unrendered template and bad arguments are refused;
#   3. `promtool check rules` accepts alerts.yml and `promtool test rules` passes alerts_test.yml.
# Usage: check_test.sh WORK_DIR. Exits 77 (ctest: skipped) when promtool is not installed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
work=${1:?usage: check_test.sh WORK_DIR}
if ! command -v promtool >/dev/null; then
  echo "promtool not found (Debian package prometheus; deploy/setup.sh installs it): skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Render for a raw token file, check it.
printf 'sd-token-raw\n' >"$work/token"
printf 'scrape-secret-0123456789' >"$work/metrics.token"
m=(--metrics-token-file "$work/metrics.token")
"$deploy/prometheus_config.sh" --server http://127.0.0.1:18080/ --token-file "$work/token" \
  "${m[@]}" --out "$work/raw" >/dev/null
promtool check config "$work/raw/prometheus.yml"
grep -q 'url: http://127.0.0.1:18080/v1/prometheus/targets$' "$work/raw/prometheus.yml" ||
  fail "service discovery URL not rendered"
grep -q "credentials_file: $work/token\$" "$work/raw/prometheus.yml" ||
  fail "credentials_file not rendered"
# The server job sends the admin token; the agent job (public series) no credential but for
# service discovery; the job-series job (everything after its name) the scrape secret. None
# honours a target's labels, and the agent job drops series naming a job or a tenant.
job_job=$(sed -n '/job_name: embody-job/,$p' "$work/raw/prometheus.yml")
agent_job=$(sed -n '/job_name: embody-agent/,/job_name: embody-job/p' "$work/raw/prometheus.yml")
server_job=$(sed -n '/job_name: embody-server/,/job_name: embody-agent/p' "$work/raw/prometheus.yml")
[ "$(grep -c "credentials_file: $work/metrics.token\$" <<<"$job_job")" = 1 ] ||
  fail "the job-series scrape job does not send the scrape secret"
[ "$(grep -c "credentials_file: $work/token\$" <<<"$job_job")" = 1 ] ||
  fail "the job-series scrape job sends the admin token for more than service discovery"
[ "$(grep -c "credentials_file: $work/token\$" <<<"$agent_job")" = 1 ] ||
  fail "the agent scrape job sends the admin token for more than service discovery"
! grep -q "metrics.token" <<<"$agent_job" || fail "the agent scrape job sends the scrape secret"
! grep -q "metrics.token" <<<"$server_job" || fail "the server scrape job sends the scrape secret"
[ "$(grep -c 'honor_labels: false' "$work/raw/prometheus.yml")" = 3 ] ||
  fail "a scrape job honours its targets' labels"
! grep -q 'honor_labels: true' "$work/raw/prometheus.yml" || fail "honor_labels: true"
grep -q 'regex: embody_job_' <<<"$agent_job" || fail "the agent job keeps job series"
! grep -q '__EMBODY_' "$work/raw/prometheus.yml" || fail "placeholder left in the rendered file"
cmp -s "$here/alerts.yml" "$work/raw/prometheus/alerts.yml" || fail "rules not copied"

# ...and for the server's bootstrap JSON: the token is extracted into a 0600 file.
printf '{"admin_token": "adm-123", "agent_token": "agt-456", "tenant": "default"}\n' \
  >"$work/bootstrap.json"
"$deploy/prometheus_config.sh" --server https://embody.example:443 \
  --token-file "$work/bootstrap.json" "${m[@]}" --out "$work/json" >/dev/null
promtool check config "$work/json/prometheus.yml"
[ "$(cat "$work/json/sd_token")" = "adm-123" ] || fail "admin_token not extracted"
[ "$(stat -c %a "$work/json/sd_token")" = "600" ] || fail "sd_token is not mode 0600"
grep -q "credentials_file: $work/json/sd_token\$" "$work/json/prometheus.yml" ||
  fail "credentials_file does not point at the extracted token"

# ...with the intervals overridden (what the real-Prometheus test does); defaults stay otherwise.
"$deploy/prometheus_config.sh" --server http://127.0.0.1:18080 --token-file "$work/token" \
  "${m[@]}" --out "$work/fast" --scrape-interval 1s --sd-refresh-interval 500ms >/dev/null
promtool check config "$work/fast/prometheus.yml"
[ "$(grep -c '^  scrape_interval: 1s$' "$work/fast/prometheus.yml")" = 1 ] || fail "scrape_interval"
[ "$(grep -c '^  evaluation_interval: 1s$' "$work/fast/prometheus.yml")" = 1 ] ||
  fail "evaluation_interval"
[ "$(grep -c '^        refresh_interval: 500ms$' "$work/fast/prometheus.yml")" = 3 ] ||
  fail "refresh_interval not set for every scrape job"
grep -q '^  scrape_interval: 15s$' "$work/raw/prometheus.yml" || fail "default scrape_interval"
[ "$(grep -c '^        refresh_interval: 30s$' "$work/raw/prometheus.yml")" = 3 ] ||
  fail "default refresh_interval"

# ...with a CA file: every scrape job and every discovery URL verify TLS against it.
printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' >"$work/ca.pem"
"$deploy/prometheus_config.sh" --server https://embody.example:8443 --token-file "$work/token" \
  "${m[@]}" --out "$work/tls" --ca-file "$work/ca.pem" >/dev/null
promtool check config "$work/tls/prometheus.yml" >/dev/null
[ "$(grep -c "^      ca_file: $work/ca.pem\$" "$work/tls/prometheus.yml")" = 3 ] ||
  fail "a scrape job does not verify its targets with the CA file"
[ "$(grep -c "^          ca_file: $work/ca.pem\$" "$work/tls/prometheus.yml")" = 3 ] ||
  fail "a discovery URL is not verified with the CA file"
! grep -q ca_file "$work/raw/prometheus.yml" || fail "a CA file appeared without --ca-file"
printf 'not a certificate\n' >"$work/notca.pem"

# 2. The template as shipped is not a usable config, and bad arguments are refused.
mkdir -p "$work/template/prometheus"
cp "$deploy/prometheus.yml" "$work/template/"
cp "$here/alerts.yml" "$work/template/prometheus/"
if promtool check config "$work/template/prometheus.yml" >/dev/null 2>&1; then
  fail "promtool accepted the unrendered template: the check above proves nothing"
fi
printf 'sd-token-raw' >"$work/same.token"
printf 'two words\n' >"$work/two.token"
mt="--metrics-token-file $work/metrics.token"
for args in "--server 127.0.0.1:8080 --token-file $work/token $mt --out $work/x" \
            "--server http://h:1 --token-file $work/missing $mt --out $work/x" \
            "--server http://h:1 $mt --out $work/x" \
            "--server http://h:1 --token-file $work/token --out $work/x" \
            "--server http://h:1 --token-file $work/token --metrics-token-file $work/none --out $work/x" \
            "--server http://h:1 --token-file $work/token --metrics-token-file $work/same.token --out $work/x" \
            "--server http://h:1 --token-file $work/bootstrap.json --metrics-token-file $work/json/sd_token --out $work/x" \
            "--server http://h:1 --token-file $work/token --metrics-token-file $work/two.token --out $work/x" \
            "--server http://h:1 --token-file $work/token $mt --out $work/x --scrape-interval 1" \
            "--server http://h:1 --token-file $work/token $mt --out $work/x --sd-refresh-interval 0s" \
            "--server http://h:1 --token-file $work/token $mt --out $work/x --scrape-interval" \
            "--server http://h:1 --token-file $work/token $mt --out $work/x --ca-file $work/notca.pem" \
            "--server http://h:1 --token-file $work/token $mt --out $work/x --ca-file $work/none.pem"; do
  # shellcheck disable=SC2086
  if "$deploy/prometheus_config.sh" $args >/dev/null 2>&1; then fail "accepted: $args"; fi
done

# 3. Rules: syntax, then behaviour on synthetic series.
promtool check rules "$here/alerts.yml"
promtool test rules "$here/alerts_test.yml"
echo "prometheus_config_check: OK"
