#!/usr/bin/env bash
# Writes the Parquet test fixtures with the independent writer (gen_fixtures.mjs) into OUT_DIR,
# and small LeRobot datasets (gen_lerobot.mjs) into OUT_DIR/lerobot,
# installing its pinned npm packages into WORK_DIR first (only when package-lock.json changed,
# so a machine that installed once builds offline).
#
#   generate_fixtures.sh SRC_DIR WORK_DIR OUT_DIR
#
# Where node or npm is missing, or the registry cannot be reached, OUT_DIR/UNAVAILABLE says why
# and the tests that need these fixtures skip with that reason (the committed fixtures in
# SRC_DIR are still tested). A failure of the generator itself fails the build.
set -euo pipefail

src=$1 work=$2 out=$3
mkdir -p "$work" "$out"
rm -f "$out/UNAVAILABLE"
unavailable() {
  echo "$1" >"$out/UNAVAILABLE"
  echo "parquet fixtures not generated: $1" >&2
  exit 0
}
command -v node >/dev/null 2>&1 || unavailable "node is not installed (deploy/setup.sh installs nodejs)"
command -v npm >/dev/null 2>&1 || unavailable "npm is not installed (deploy/setup.sh installs npm)"
cp "$src/package.json" "$src/package-lock.json" "$src/gen_fixtures.mjs" "$src/gen_lerobot.mjs" \
  "$src/read_parquet.mjs" "$work/"
stamp="$work/node_modules/.embody-installed-lock.json"
if ! cmp -s "$src/package-lock.json" "$stamp"; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error) ||
    unavailable "npm ci of storage/parquet/testdata/package-lock.json failed (npm registry unreachable?)"
  cp "$src/package-lock.json" "$stamp"
fi
node "$work/gen_fixtures.mjs" "$out"
# LeRobot v2.1 / v3.0 datasets without their videos, for storage/lerobot_dataset_test.cc.
node "$work/gen_lerobot.mjs" "$out/lerobot"
