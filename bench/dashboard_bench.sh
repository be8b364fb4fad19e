#!/usr/bin/env bash
# The dashboard's timings in chromium, on a whole local stack seeded with 10,000 finished jobs and
# three jobs with 100,000 stored step events each: the jobs page's first load (navigation start
# to rows shown, best of 3 fresh tabs), the next page, the list route at random cursors (p50,
# p95), the metrics route, the job page's charts and the comparison of the three jobs
# (navigation to drawn, best of 3 each). It runs the browser test (tests/browser) with
# EMBODY_STRICT_TIMING=1, so it fails when a target is missed (jobs page 1 s, charts and
# comparison 500 ms), and prints its figures; the last line is the JSON.
#
#   bench/dashboard_bench.sh [BUILD_DIR]     (default: build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
cmake --build "$build" --target browser_test embody-web embody-server embody-agent embody-engine >/dev/null
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(EMBODY_STRICT_TIMING=1 "$build/bin/browser_test" --gtest_filter='*DashboardInChromium*' 2>&1) || {
  echo "$out"
  exit 1
}
echo "$out" | grep -E "^\[.*(first load|in page|charts drawn|GET /v1/jobs)" || true
echo "$out" | grep -E '^\{"figures"' | tail -n 1
