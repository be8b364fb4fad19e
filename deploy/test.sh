#!/usr/bin/env bash
# Sets the machine up, builds everything and runs every test with ctest (unit, pg, mpi,
# end-to-end). Extra arguments go to ctest, e.g. `./deploy/test.sh -L unit` or `-LE slow`.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBODY_BUILD_DIR:-$repo/build}

"$repo/deploy/setup.sh" --test
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
cd "$build"
# One test more than the cores: many tests spend much of their time waiting on the services they
# start (server, agents, PostgreSQL, Chromium), and with one per core the cores were a third idle
# (docs/benchmarks.md, "Build and tests").
ctest --output-on-failure --timeout 900 -j "$(($(nproc) + 1))" "$@"
