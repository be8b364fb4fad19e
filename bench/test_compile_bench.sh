#!/usr/bin/env bash
# Compile time of test sources, side by side: the way they were built (the build's -O3, every
# header parsed) against the way they are now (-O1 outside engine/, the shared precompiled
# header of gtest and nlohmann-json, CMakeLists.txt embody_use_test_pch). CPU seconds of g++ per
# source (user + sys, so a busy machine changes them less than wall time), summed over a sample.
#
#   bench/test_compile_bench.sh [BUILD_DIR] [N]     defaults: build, 24 sources
#
# BUILD_DIR must be configured (its precompiled header built: `cmake --build build --target
# embody_test_pch_o1`). The sample is every k-th *_test.cc outside engine/, in name order. The last
# line is JSON.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
n=${2:-24}
pch=$build/CMakeFiles/embody_test_pch_o1.dir/cmake_pch.hxx
[ -f "$pch.gch" ] || { echo "no $pch.gch: cmake --build $build --target embody_test_pch_o1" >&2; exit 2; }
common="-DNDEBUG -Wall -Wextra -Wno-unused-parameter -Wno-maybe-uninitialized -Wno-restrict"
common="$common -DGTEST_HAS_PTHREAD=1 -std=c++20 -I$repo -I/usr/include/hdf5/serial"
mapfile -t all < <(cd "$repo" && git ls-files '*_test.cc' | grep -v '^engine/' | sort)
step=$(( ${#all[@]} / n )); [ "$step" -ge 1 ] || step=1
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
# CPU seconds of one compile; empty when it fails (a source that needs its target's own
# definitions, e.g. fixture paths, is left out of the sample).
cpu() { /usr/bin/time -f "%U %S" -o "$out/t" "$@" >/dev/null 2>"$out/err" || return 0
        grep -q 'Winvalid-pch' "$out/err" && { echo "the precompiled header was not used:" >&2
                                               cat "$out/err" >&2; exit 1; }
        awk '{printf "%.2f", $1 + $2}' "$out/t"; }
before=0; after=0; count=0
printf '%-52s %9s %9s\n' source before_s after_s
for ((i = 0; i < ${#all[@]} && count < n; i += step)); do
  src=${all[$i]}
  b=$(cd "$repo" && cpu g++ -O3 $common -c "$src" -o "$out/b.o")
  [ -n "$b" ] || { printf '%-52s %9s\n' "$src" "skipped (needs its target's flags)"; continue; }
  a=$(cd "$repo" && cpu g++ -O3 $common -O1 -Winvalid-pch -include "$pch" -c "$src" -o "$out/a.o")
  [ -n "$a" ] || { echo "$src: fails with the precompiled header" >&2; exit 1; }
  printf '%-52s %9s %9s\n' "$src" "$b" "$a"
  before=$(awk -v x="$before" -v y="$b" 'BEGIN{print x + y}')
  after=$(awk -v x="$after" -v y="$a" 'BEGIN{print x + y}')
  count=$((count + 1))
done
cpu_model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
ratio=$(awk -v b="$before" -v a="$after" 'BEGIN{printf "%.3f", a / b}')
echo "sum over $count sources: before $before s, after $after s: after/before $ratio ($cpu_model; load $(cut -d' ' -f1 /proc/loadavg))"
printf '{"bench":"test_compile","sources":%d,"before_cpu_s":%s,"after_cpu_s":%s,"ratio":%s,"cpu":"%s"}\n' \
  "$count" "$before" "$after" "$ratio" "$cpu_model"
