#!/bin/bash
# wrk_submit.sh: sustained accepted submissions per second, POST /v1/jobs under wrk, against a
# running control plane (the quickstart's, or any: EMBODY_URL and a cluster-admin EMBODY_TOKEN).
#
#   bench/wrk_submit.sh [CONNECTIONS=32] [SECONDS=10] [THREADS=2]
#
# wrk (Debian package wrk) keeps CONNECTIONS connections busy for SECONDS, each request a new
# `command` job (bench/wrk_submit.lua), authenticated as a member of a tenant made for the run.
# Every submission is validated, authorised, admitted and stored (201: durable when answered);
# so that none of them runs, the script DRAINS EVERY NODE of the stack first and leaves them
# drained, with the run's jobs PENDING. Run it against a stack you can throw away, e.g. a
# quickstart of its own:
#   export EMBODY_HOME=/tmp/wrk-stack
#   ./deploy/quickstart.sh && bench/wrk_submit.sh 32 10; ./deploy/quickstart.sh stop
# Prints wrk's own report, then one JSON line: accepted (201) per second, latency p50/p99/max
# over every response, and the count of each status.
#
# With a queue already long: WRK_GROW_S=N first submits for N seconds as the measured runs do
# (its JSON line says "wrk_submit_grow"), and WRK_RUNS=R measures R runs one after the other
# on the queue so grown (every submitted job stays PENDING), e.g.
#   WRK_GROW_S=40 WRK_RUNS=3 bench/wrk_submit.sh 32 10   # about 100,000 jobs queued, then 3 runs
set -euo pipefail

connections=${1:-32}
seconds=${2:-10}
threads=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cli=${EMBODY_CLI:-$root/build/bin/embody}

command -v wrk >/dev/null || { echo "wrk_submit.sh: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
if [[ -z "${EMBODY_URL:-}" || -z "${EMBODY_TOKEN:-}" ]]; then
  env_file=${EMBODY_HOME:-$root/.embody}/env
  [[ -f "$env_file" ]] || { echo "wrk_submit.sh: no EMBODY_URL/EMBODY_TOKEN and no $env_file (run ./deploy/quickstart.sh)" >&2; exit 2; }
  # shellcheck disable=SC1090
  source "$env_file"
fi
export EMBODY_URL EMBODY_TOKEN

drained=0
for id in $("$cli" nodes -o json | grep -o '"id" *: *[0-9]*' | grep -o '[0-9]*$'); do
  "$cli" nodes drain "$id" >/dev/null || { echo "wrk_submit.sh: could not drain node $id" >&2; exit 1; }
  drained=$((drained + 1))
done
[[ $drained -gt 0 ]] || { echo "wrk_submit.sh: the stack has no node, so every job would be refused as never fitting" >&2; exit 1; }
tenant=wrk-$(date +%s)
tenant_id=$("$cli" tenants create "$tenant" --quota-pending-jobs none -o json |
            grep -o '"id" *: *[0-9]*' | head -1 | grep -o '[0-9]*$')
[[ -n "$tenant_id" ]] || { echo "wrk_submit.sh: could not make tenant $tenant" >&2; exit 1; }
secret=$("$cli" tokens create --tenant "$tenant_id" --role member --name wrk -o json |
         sed -n 's/.*"token" *: *"\([^"]*\)".*/\1/p')
[[ -n "$secret" ]] || { echo "wrk_submit.sh: no token made for $tenant" >&2; exit 1; }

echo "wrk_submit: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "$connections connections, $threads threads, $seconds s against $EMBODY_URL, tenant $tenant"
if (( ${WRK_GROW_S:-0} > 0 )); then
  WRK_TOKEN=$secret wrk -t "$threads" -c "$connections" -d "${WRK_GROW_S}s" \
    -s "$here/wrk_submit.lua" "$EMBODY_URL/v1/jobs" | sed -n 's/^{"bench":"wrk_submit"/{"bench":"wrk_submit_grow"/p'
fi
for ((run = 1; run <= ${WRK_RUNS:-1}; ++run)); do
  WRK_TOKEN=$secret wrk -t "$threads" -c "$connections" -d "${seconds}s" --latency \
    -s "$here/wrk_submit.lua" "$EMBODY_URL/v1/jobs"
done

echo "wrk_submit: the stack's $drained nodes are left drained, and tenant $tenant's jobs PENDING"
