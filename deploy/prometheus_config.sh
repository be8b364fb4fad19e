#!/usr/bin/env bash
# Renders deploy/prometheus.yml for one Embody deployment:
#
#   deploy/prometheus_config.sh --server http://HOST:PORT --token-file FILE \
#       --metrics-token-file SECRET_FILE --out DIR [--scrape-interval 15s] [--sd-refresh-interval 30s]
#       [--ca-file CA_FILE]
#
# writes DIR/prometheus.yml and DIR/prometheus/alerts.yml; run `prometheus
# --config.file=DIR/prometheus.yml`. FILE holds the bearer token for service discovery, alone or
# as the server's bootstrap JSON ({"admin_token": ...}); from JSON the token is extracted into
# DIR/sd_token (mode 0600), because Prometheus reads credentials files verbatim.
# SECRET_FILE holds the agents' scrape secret alone (the file the agents were given as
# --metrics-token-file); Prometheus sends it to every agent, so it must not be the admin token.
# --scrape-interval sets how often targets are scraped and rules evaluated (global
# scrape_interval and evaluation_interval), --sd-refresh-interval how often the target list is
# fetched; both take Prometheus durations (500ms, 1s, 2m). Tests use 1s for both.
# --ca-file: the CAs the server's and the agents' TLS certificates chain to (their --tls-cert;
# docs/operations.md): Prometheus verifies the service discovery URL and every https target with
# it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
usage() {
  echo "usage: $0 --server http://HOST:PORT --token-file FILE --metrics-token-file FILE" \
    "--out DIR [--scrape-interval DURATION] [--sd-refresh-interval DURATION] [--ca-file FILE]" >&2
  exit 2
}

server="" token_file="" metrics_token_file="" out="" scrape_interval="" sd_refresh="" ca_file=""
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=${2:-}; shift 2 || usage ;;
    --token-file) token_file=${2:-}; shift 2 || usage ;;
    --metrics-token-file) metrics_token_file=${2:-}; shift 2 || usage ;;
    --out) out=${2:-}; shift 2 || usage ;;
    --scrape-interval) scrape_interval=${2:-}; shift 2 || usage ;;
    --sd-refresh-interval) sd_refresh=${2:-}; shift 2 || usage ;;
    --ca-file) ca_file=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[ -n "$server" ] && [ -n "$token_file" ] && [ -n "$metrics_token_file" ] && [ -n "$out" ] || usage
for d in "$scrape_interval" "$sd_refresh"; do
  if [ -n "$d" ] && ! [[ "$d" =~ ^[1-9][0-9]*(ms|s|m|h)$ ]]; then
    echo "$0: '$d' is not a duration such as 500ms, 1s or 2m" >&2
    exit 2
  fi
done
case "$server" in
  http://*|https://*) ;;
  *) echo "$0: --server must be an http:// or https:// URL, got '$server'" >&2; exit 2 ;;
esac
server=${server%/}
[ -r "$token_file" ] || { echo "$0: cannot read token file '$token_file'" >&2; exit 2; }
[ -r "$metrics_token_file" ] ||
  { echo "$0: cannot read metrics token file '$metrics_token_file'" >&2; exit 2; }
if [ -n "$ca_file" ]; then
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca_file" 2>/dev/null ||
    { echo "$0: '$ca_file' holds no PEM certificate" >&2; exit 2; }
  ca_file=$(cd "$(dirname "$ca_file")" && pwd)/$(basename "$ca_file")
fi

mkdir -p "$out/prometheus"
out=$(cd "$out" && pwd)
token_file=$(cd "$(dirname "$token_file")" && pwd)/$(basename "$token_file")
if grep -q '"admin_token"' "$token_file"; then
  token=$(sed -n 's/.*"admin_token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$token_file")
  [ -n "$token" ] || { echo "$0: no admin_token in '$token_file'" >&2; exit 2; }
  (umask 077 && printf '%s' "$token" >"$out/sd_token")
  token_file=$out/sd_token
fi
metrics_token_file=$(cd "$(dirname "$metrics_token_file")" && pwd)/$(basename "$metrics_token_file")
# The agents' secret: one word (as embody-agent reads it), and not the admin token.
secret=$(tr -d ' \t\r\n' <"$metrics_token_file")
[ -n "$secret" ] && [ "$(wc -w <"$metrics_token_file")" -eq 1 ] ||
  { echo "$0: '$metrics_token_file' must hold the scrape secret alone" >&2; exit 2; }
if [ "$secret" = "$(tr -d ' \t\r\n' <"$token_file")" ]; then
  echo "$0: the metrics token is the service discovery token: every agent would receive it" >&2
  exit 2
fi

# Escapes what is special in a sed replacement (with '|' as the delimiter).
sed_escape() { printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'; }
overrides=()
if [ -n "$scrape_interval" ]; then
  overrides+=(-e "s|^  scrape_interval: .*|  scrape_interval: $scrape_interval|"
              -e "s|^  evaluation_interval: .*|  evaluation_interval: $scrape_interval|")
fi
if [ -n "$sd_refresh" ]; then
  overrides+=(-e "s|^        refresh_interval: .*|        refresh_interval: $sd_refresh|")
fi
sed -e "s|__EMBODY_SERVER_URL__|$(sed_escape "$server")|g" \
  -e "s|__EMBODY_TOKEN_FILE__|$(sed_escape "$token_file")|g" \
  -e "s|__EMBODY_METRICS_TOKEN_FILE__|$(sed_escape "$metrics_token_file")|g" \
  ${overrides[@]+"${overrides[@]}"} \
  "$here/prometheus.yml" >"$out/prometheus.yml"
if [ -n "$ca_file" ]; then
  # Every scrape job (its https targets) and every discovery URL verify against the CA file.
  awk -v ca="$ca_file" '
    { print }
    /^  - job_name: / { print "    tls_config:"; print "      ca_file: " ca }
    /^      - url: /  { print "        tls_config:"; print "          ca_file: " ca }
  ' "$out/prometheus.yml" >"$out/prometheus.yml.tmp"
  mv "$out/prometheus.yml.tmp" "$out/prometheus.yml"
fi
cp "$here/prometheus/alerts.yml" "$out/prometheus/alerts.yml"
echo "$out/prometheus.yml"
