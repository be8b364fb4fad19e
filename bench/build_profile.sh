#!/usr/bin/env bash
# Where a fresh build's time goes: configures BUILD_DIR from scratch with a launcher that records
# every compile and link step's CPU seconds (user + sys: a busy machine changes them less than
# wall time), builds it (or only TARGETS) with -j JOBS, and prints the build's wall time, the
# CPU seconds by kind (compile, link) and by folder, and the costliest steps. The last line is
# JSON.
#
#   bench/build_profile.sh [-j JOBS] [-G GENERATOR] [-D VAR=VALUE]... BUILD_DIR [TARGET...]
#
# BUILD_DIR is removed first. Defaults: -j $(nproc), the generator deploy/test.sh uses. -D is
# passed to cmake (e.g. -D EMBODY_UNITY_BUILD=OFF, the build as it was before unity builds).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc); gen=(); defs=()
while getopts "j:G:D:" o; do
  case $o in j) jobs=$OPTARG ;; G) gen=(-G "$OPTARG") ;; D) defs+=("-D$OPTARG") ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n 2,11p "$0" >&2; exit 2; }
build=$1; shift
case $build in /*) ;; *) build=$PWD/$build ;; esac
rm -rf "$build"; mkdir -p "$build"
log=$build/build_steps.log
launcher=$build/step_timer.sh
# One line per step: kind, CPU seconds, wall seconds, output file.
cat > "$launcher" <<'LAUNCHER'
#!/bin/sh
[ -n "$EMBODY_BUILD_STEPS" ] || exec "$@"  # a later build in the same directory: not recorded
out=?; prev=; kind=compile
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
case $out in /*|\?) ;; *) out=$PWD/$out ;; esac  # Make runs each folder's steps from there
case " $* " in *" -c "*) ;; *) kind=link ;; esac
t=$(mktemp)
/usr/bin/time -f "%U %S %e" -o "$t" "$@"; rc=$?
awk -v k="$kind" -v o="$out" '{printf "%s %.2f %.2f %s\n", k, $1 + $2, $3, o}' "$t" >> "$EMBODY_BUILD_STEPS"
rm -f "$t"; exit $rc
LAUNCHER
chmod +x "$launcher"
export EMBODY_BUILD_STEPS=$log
start=$(date +%s.%N)
cmake -S "$repo" -B "$build" "${gen[@]}" "${defs[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher" \
  -DCMAKE_CXX_LINKER_LAUNCHER="$launcher" -DCMAKE_C_LINKER_LAUNCHER="$launcher" >/dev/null
configured=$(date +%s.%N)
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}" >"$build/build_output.log" 2>&1 || {
  tail -30 "$build/build_output.log" >&2; exit 1; }
end=$(date +%s.%N)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "configure $(awk -v a="$start" -v b="$configured" 'BEGIN{printf "%.0f", b - a}') s," \
     "build $(awk -v a="$configured" -v b="$end" 'BEGIN{printf "%.0f", b - a}') s with -j $jobs" \
     "on $cpu (load at the end $load)"
echo; echo "CPU seconds by kind:"
awk '{s[$1] += $2; n[$1]++} END{for (k in s) printf "  %-8s %8.0f s  %4d steps\n", k, s[k], n[k]}' "$log"
echo; echo "CPU seconds by folder (compile + link):"
awk -v b="$build/" '{o = $4; if (index(o, b) == 1) o = substr(o, length(b) + 1); split(o, p, "/");
      f = p[1]; if (f == "bin") f = "bin (links)"; s[f] += $2}
      END{for (k in s) printf "  %-24s %8.0f s\n", k, s[k]}' "$log" | sort -k2 -rn
echo; echo "Costliest 25 steps (CPU s, wall s, output):"
sort -k2 -rn "$log" | head -25 |
  awk -v b="$build/" '{o = $4; if (index(o, b) == 1) o = substr(o, length(b) + 1)
                       printf "  %-8s %7.1f %7.1f  %s\n", $1, $2, $3, o}'
awk -v cpu="$cpu" -v a="$configured" -v b="$end" -v j="$jobs" '
  {s[$1] += $2; n[$1]++}
  END{printf "{\"bench\":\"build_profile\",\"cpu\":\"%s\",\"jobs\":%d,\"build_wall_s\":%.1f,\"compile_cpu_s\":%.1f,\"compile_steps\":%d,\"link_cpu_s\":%.1f,\"link_steps\":%d}\n",
      cpu, j, b - a, s["compile"], n["compile"], s["link"], n["link"]}' "$log"
