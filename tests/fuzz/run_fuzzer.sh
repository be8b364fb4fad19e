#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time (the `fuzz` ctests). The checked-in seeds are read,
# never written: new inputs go to WORK/corpus, kept between runs, and a finding to
# WORK/artifacts, from where it reproduces with `FUZZER WORK/artifacts/<file>`.
#
#   run_fuzzer.sh FUZZER SEED_DIR WORK SECONDS [DICT]
#
# SECONDS bounds the whole run. libFuzzer always executes every input of both corpora before it
# starts mutating (however long that takes), so each run replays all seeds and all inputs kept by
# earlier runs, and fuzzes for what is left of SECONDS. To keep that replay short, a passing run
# merges WORK/corpus down to the inputs that add coverage (libFuzzer -merge=1) once it has grown
# to twice its size after the last merge (plus a slack of 200 inputs, well under a second of
# replay): without that the directory keeps every input any run ever kept, most of them redundant.
set -euo pipefail

fuzzer=$1 seeds=$2 work=$3 seconds=$4 dict=${5:-}
[ -x "$fuzzer" ] || { echo "run_fuzzer: $fuzzer is not built (cmake --build build --target embody_fuzzers)" >&2; exit 1; }
mkdir -p "$work/corpus" "$work/artifacts"
common=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/")
args=("${common[@]}" -max_total_time="$seconds" -print_final_stats=1)
if [ -n "$dict" ]; then args+=(-dict="$dict"); fi
# libFuzzer writes only into the first corpus directory.
if ! "$fuzzer" "${args[@]}" "$work/corpus" "$seeds"; then
  echo "run_fuzzer: $(basename "$fuzzer") found an input that fails; kept in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  exit 1
fi

# Every input was just run without a finding, so the merge cannot drop a failing one; it only
# leaves out inputs whose coverage others already reach. The old directory is replaced only once
# the merge has finished.
count=$(find "$work/corpus" -type f | wc -l)
merged=$(cat "$work/corpus.merged-count" 2>/dev/null || echo 0)
if ((count <= 2 * merged + 200)); then
  exit 0
fi
rm -rf "$work/corpus.merged"
mkdir "$work/corpus.merged"
if "$fuzzer" "${common[@]}" -merge=1 "$work/corpus.merged" "$work/corpus" >"$work/merge.log" 2>&1; then
  rm -rf "$work/corpus"
  mv "$work/corpus.merged" "$work/corpus"
  find "$work/corpus" -type f | wc -l > "$work/corpus.merged-count"
  echo "run_fuzzer: corpus merged from $count to $(cat "$work/corpus.merged-count") inputs"
else
  echo "run_fuzzer: corpus merge failed (kept the unmerged corpus); see $work/merge.log" >&2
  rm -rf "$work/corpus.merged"
fi
