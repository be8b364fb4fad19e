#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time (the `fuzz` ctests). The checked-in seeds are read,
# never written: new inputs go to WORK/corpus, kept between runs, and a finding to
# WORK/artifacts, from where it reproduces with `FUZZER WORK/artifacts/<file>`.
#
#   run_fuzzer.sh FUZZER SEED_DIR WORK SECONDS [DICT]
set -euo pipefail

fuzzer=$1 seeds=$2 work=$3 seconds=$4 dict=${5:-}
[ -x "$fuzzer" ] || { echo "run_fuzzer: $fuzzer is not built (cmake --build build --target embody_fuzzers)" >&2; exit 1; }
mkdir -p "$work/corpus" "$work/artifacts"
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$work/artifacts/")
if [ -n "$dict" ]; then args+=(-dict="$dict"); fi
# libFuzzer writes only into the first corpus directory.
if "$fuzzer" "${args[@]}" "$work/corpus" "$seeds"; then
  exit 0
fi
echo "run_fuzzer: $(basename "$fuzzer") found an input that fails; kept in $work/artifacts:" >&2
ls -l "$work/artifacts" >&2
exit 1
