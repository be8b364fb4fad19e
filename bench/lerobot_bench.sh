#!/bin/bash
# lerobot_bench.sh: issue 27's three goals for LeRobot data in one run (docs/benchmarks.md,
# "LeRobot import"):
#   1. import of a generated LeRobot v3.0 dataset (100 episodes x 300 frames, one 224x224 AV1
#      camera, 14-dim state/action, 30 fps) on one decoder thread >= 5x real time, beside
#      ffmpeg's own decode of the same files (lerobot_bench);
#   2. Parquet float columns (Snappy) decoded >= 1 GB/s on one core, beside read() (parquet_bench);
#   3. data wait < 5% of the step when the reference model trains on a 4-camera LeRobot import
#      (16 episodes x 150 frames, 4 cameras 224x224, 14-dim; lerobot_bench --import-dir, then
#      dataset_train_bench --dataset-dir).
#
#   bench/lerobot_bench.sh [BUILD_DIR=build] [extra lerobot_bench options for goal 1...]
#   env: DIR (/tmp) where the datasets go; RANKS (1) ranks training under mpirun for goal 3
#
# Each binary's own report is printed as it runs; the last line is one JSON object holding the
# three binaries' JSON lines. Exits non-zero if a binary fails (ffmpeg missing included).
set -euo pipefail
BUILD=${1:-build}
shift || true
DIR=${DIR:-/tmp}
RANKS=${RANKS:-1}
WORK=$(mktemp -d "$DIR/lerobot_bench_sh.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# libavcodec logs a line per decoder opened ("[libdav1d @ 0x...] libdav1d 1.0.0"): dropped.
drop_decoder_banners() { grep --line-buffered -v '^\[libdav1d' >&2; }

echo "== 1. LeRobot v3.0 import vs ffmpeg (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/bin/lerobot_bench" --dir "$WORK" "$@" 2> >(drop_decoder_banners) | tee "$WORK/import.txt"

echo "== 2. Parquet decode vs read() (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/bin/parquet_bench" --dir "$WORK" | tee "$WORK/parquet.txt"

echo "== 3. Training on a 4-camera LeRobot import (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$BUILD/bin/lerobot_bench" --dir "$WORK" --episodes 16 --frames 150 --cameras 4 \
  --import-dir "$WORK/four_cameras" 2> >(drop_decoder_banners) | tee "$WORK/four.txt"
train=("$BUILD/bin/dataset_train_bench" --dataset-dir "$WORK/four_cameras" --action-dim 14
       --goal 0.05)
if [ "$RANKS" -gt 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  train=(mpirun -np "$RANKS" --oversubscribe "${train[@]}")
fi
"${train[@]}" | tee "$WORK/train.txt"
rm -rf "$WORK/four_cameras"

/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
last = lambda name: json.loads(open(f"{w}/{name}.txt").read().strip().splitlines()[-1])
imp, pq, four, train = (last(n) for n in ("import", "parquet", "four", "train"))
print(f"1. import {imp['import_frames_per_s']:.0f} frames/s = {imp['realtime']:.1f}x real time "
      f"({imp['realtime_per_cpu_second']:.1f}x per CPU second), ffmpeg "
      f"{imp['ffmpeg_frames_per_s']:.0f} frames/s: import / ffmpeg {imp['import_over_ffmpeg']:.3f}"
      f" (goal >= 5x real time: {'met' if imp['goal_met'] else 'NOT met'})")
worst = min(pq[k]["decode_gbps"] for k in ("flat", "list"))
print(f"2. parquet decode flat {pq['flat']['decode_gbps']:.2f} GB/s, list "
      f"{pq['list']['decode_gbps']:.2f} GB/s (read() {pq['flat']['read_gbps']:.2f}) "
      f"(goal >= 1 GB/s: {'met' if worst >= 1 else 'NOT met'})")
print(f"3. 4-camera import {four['realtime']:.1f}x real time; training data wait "
      f"{100 * train['shards_data_wait_share']:.2f}% of the step "
      f"({1e3 * train['shards_step_seconds']:.0f} ms/step) "
      f"(goal < 5%: {'met' if train['goal_met'] else 'NOT met'})")
print(json.dumps({"bench": "lerobot", "import": imp, "parquet": pq, "four_camera_import": four,
                  "train": train,
                  "goals_met": {"import": imp["goal_met"], "parquet": worst >= 1,
                                "data_wait": train["goal_met"]}}))
PY
