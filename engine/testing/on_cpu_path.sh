#!/bin/sh
# on_cpu_path.sh PROBE PATH COMMAND [ARG...]: runs COMMAND with EMBODY_CPU_PATH=PATH, or exits 77
# (ctest: skipped) when this CPU cannot run PATH (PROBE is build/bin/cpu_path_probe).
set -eu
probe=$1
path=$2
shift 2
status=0
"$probe" "$path" || status=$?
[ "$status" -eq 0 ] || exit "$status"
EMBODY_CPU_PATH=$path
export EMBODY_CPU_PATH
exec "$@"
