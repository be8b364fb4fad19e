#!/usr/bin/env bash
# Sets this machine up, builds Embody and runs a demo training job on a local two-node cluster:
# a private PostgreSQL, embody-server and two agents (node-a, node-b), all on loopback. The stack
# keeps running afterwards; `./deploy/quickstart.sh stop` stops exactly what this script started.
#
# State lives in $EMBODY_HOME (default: .embody/ in the repository). Running it again restarts
# the stack on the same database, port and tokens.
#
#   quickstart.sh              install packages, build, start the stack, run the demo job
#   quickstart.sh --no-build   the same with what is installed and built already: no packages, no
#                              build, the binaries in $EMBODY_BUILD_DIR/bin (default build/bin)
#   quickstart.sh stop         stop what it started
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
export EMBODY_HOME=${EMBODY_HOME:-$repo/.embody}
build=${EMBODY_BUILD_DIR:-$repo/build}
bin=$build/bin
mkdir -p "$EMBODY_HOME/logs"
EMBODY_HOME=$(cd "$EMBODY_HOME" && pwd)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'quickstart: %s\n' "$*" >&2; exit 1; }

# Where what other users must reach lives: the private PostgreSQL cluster (its files belong to the
# `postgres` user when run as root) and the agents' data directories (jobs run as unprivileged
# uids, which must pass through every parent). When EMBODY_HOME sits below a private directory
# (such as /root), that is /var/tmp/embody-<hash of EMBODY_HOME>/ (0711), recorded in
# EMBODY_HOME/rundir; else EMBODY_HOME itself. The directory is part of this EMBODY_HOME's state:
# found with no record in EMBODY_HOME (removed with `rm -rf .embody`), whatever runs from it is
# stopped and it is removed, so starting afresh works and `stop` leaves nothing running.
run_dir_candidate() {
  if [ "$(id -u)" -eq 0 ] && ! runuser -u nobody -- test -x "$EMBODY_HOME"; then
    echo "/var/tmp/embody-$(printf '%s' "$EMBODY_HOME" | sha1sum | cut -c1-12)"
  else
    echo "$EMBODY_HOME"
  fi
}

# The server and agents started for this EMBODY_HOME, found by their data directories rather than
# by recorded pids: a record may be gone with the rest of an earlier EMBODY_HOME, and a recorded pid
# may have been reused since. `stack_pids RUN_DIR [--agents]`.
re_escape() { printf '%s' "$1" | sed 's/[][\.^$*+?(){}|]/\\&/g'; }
stack_pids() {
  local re_home re_run
  re_home=$(re_escape "$EMBODY_HOME")
  re_run=$(re_escape "$1")
  if [ "${2:-}" = "--agents" ]; then
    pgrep -f -- "--data-dir $re_run/agents/" 2>/dev/null || true
  else
    pgrep -f -- "--data-dir ($re_home/server|$re_run/agents/)" 2>/dev/null || true
  fi
}

# Stops what runs from RUN_DIR and EMBODY_HOME: agents first (they stop their jobs), then the
# server, then PostgreSQL.
stop_at() {
  local run=$1 pid
  for pid in $(stack_pids "$run" --agents); do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do [ -z "$(stack_pids "$run" --agents)" ] && break; sleep 0.2; done
  for pid in $(stack_pids "$run"); do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do [ -z "$(stack_pids "$run")" ] && break; sleep 0.2; done
  for pid in $(stack_pids "$run"); do kill -KILL "$pid" 2>/dev/null || true; done
  local pg=$run/pg
  # A cluster placed by an earlier quickstart, which recorded only its PostgreSQL directory.
  [ -f "$EMBODY_HOME/pgdir" ] && pg=$(cat "$EMBODY_HOME/pgdir")
  if [ -f "$pg/pgdata/PG_VERSION" ]; then "$repo/deploy/pg_cluster.sh" stop "$pg"; fi
}

run_dir() {
  if [ -f "$EMBODY_HOME/rundir" ]; then cat "$EMBODY_HOME/rundir"; return; fi
  local d
  d=$(run_dir_candidate)
  if [ "$d" != "$EMBODY_HOME" ]; then
    if [ -e "$d" ]; then
      echo "    removing $d, left by an earlier $EMBODY_HOME that no longer records it" >&2
      stop_at "$d" >&2
      rm -rf "$d"
    fi
    mkdir -p "$d"
    chmod 0711 "$d"
  fi
  echo "$d" >"$EMBODY_HOME/rundir"
  echo "$d"
}

stop_stack() {
  if [ -f "$EMBODY_HOME/rundir" ]; then stop_at "$(cat "$EMBODY_HOME/rundir")"; else stop_at "$(run_dir_candidate)"; fi
}

if [ "${1:-}" = "stop" ]; then
  stop_stack
  echo "stopped the Embody stack in $EMBODY_HOME"
  exit 0
fi
build_it=1
case "$*" in
  "") ;;
  --no-build) build_it=0 ;;
  *) die "usage: $0 [--no-build | stop]" ;;
esac

if [ "$build_it" -eq 1 ]; then
  say "Installing packages (deploy/setup.sh)"
  "$repo/deploy/setup.sh"

  say "Building (Release) in $build"
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$EMBODY_HOME/logs/cmake.log" ||
    die "cmake failed, see $EMBODY_HOME/logs/cmake.log"
  cmake --build "$build" -j "$(nproc)" --target embody-server embody-agent embody-engine embody \
    embody-data embody-web embody-python-sdk
else
  for exe in embody-server embody-agent embody-engine embody embody-data; do
    [ -x "$bin/$exe" ] || die "--no-build: $bin/$exe is missing; build it, or run without --no-build"
  done
fi

# A second run restarts what the first one left running.
stop_stack

say "Starting PostgreSQL"
rundir=$(run_dir)
pgdir=$rundir/pg
[ -f "$EMBODY_HOME/pgdir" ] && pgdir=$(cat "$EMBODY_HOME/pgdir")
conninfo=$("$repo/deploy/pg_cluster.sh" start "$pgdir")
echo "    $conninfo (data in $pgdir)"

wait_for_file() {
  for _ in $(seq 1 150); do [ -s "$1" ] && return 0; sleep 0.2; done
  return 1
}

port=0
[ -f "$EMBODY_HOME/server.port" ] && port=$(cat "$EMBODY_HOME/server.port")
if [ "$port" != 0 ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then port=0; fi
rm -f "$EMBODY_HOME/server.port"

# Imported datasets (embody datasets import): one root the server and every agent name alike.
datasets=$rundir/datasets
mkdir -p "$datasets"
chmod 0755 "$datasets"

# Step events carry the planner's prediction for this machine (docs/planner.md, "Plan against
# actual"); the dashboard draws it beside the measured step time. The plan is for nodes a job
# has to itself, and here both demo ranks share two cores with the server, the agents and
# PostgreSQL, and reach each other over loopback TCP rather than shared memory (measured: the
# demo's steps took a median 2.3x and a 90th percentile 3.3x the plan), so a job is flagged only
# past 4x.
say "Starting embody-server"
nohup "$bin/embody-server" --listen "127.0.0.1:$port" --db "$conninfo" \
  --data-dir "$EMBODY_HOME/server" --dataset-root "$datasets" --port-file "$EMBODY_HOME/server.port" \
  --plan-cluster "$repo/docs/plan/this-machine.json" --plan-deviation-percent 400 \
  --bootstrap-out "$EMBODY_HOME/bootstrap.json" >"$EMBODY_HOME/logs/server.log" 2>&1 &
wait_for_file "$EMBODY_HOME/server.port" || die "server did not start, see $EMBODY_HOME/logs/server.log"
url="http://127.0.0.1:$(cat "$EMBODY_HOME/server.port")"
[ -f "$EMBODY_HOME/bootstrap.json" ] || die "no bootstrap.json: the database was bootstrapped elsewhere; remove $EMBODY_HOME to start afresh"
admin_token=$(sed -n 's/.*"admin_token" *: *"\([0-9a-f]*\)".*/\1/p' "$EMBODY_HOME/bootstrap.json")
[ -n "$admin_token" ] || die "no admin token in $EMBODY_HOME/bootstrap.json"

cat >"$EMBODY_HOME/env" <<ENV
export EMBODY_URL=$url
export EMBODY_TOKEN=$admin_token
ENV
chmod 600 "$EMBODY_HOME/env"

# The scrape secret the agents serve their per-job series to (Prometheus holds the same file):
# 256 random bits, kept across runs, readable by this user only (jobs run as other uids).
metrics_token=$EMBODY_HOME/metrics.token
if [ ! -s "$metrics_token" ]; then
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$metrics_token.tmp" &&
    mv "$metrics_token.tmp" "$metrics_token")
fi
chmod 600 "$metrics_token"

say "Starting two agents (node-a, node-b)"
slots=$(( $(nproc) / 2 )); [ "$slots" -ge 1 ] || slots=1
for node in node-a node-b; do
  nohup "$bin/embody-agent" --server "$url" --token-file "$EMBODY_HOME/bootstrap.json" \
    --metrics-token-file "$metrics_token" \
    --name "$node" --data-dir "$rundir/agents/$node" --dataset-root "$datasets" --slots "$slots" \
    --address 127.0.0.1 >"$EMBODY_HOME/logs/agent-$node.log" 2>&1 &
done

embody() { "$bin/embody" "$@"; }
for _ in $(seq 1 100); do
  up=$(embody nodes 2>/dev/null | awk '$4 == "UP"' | wc -l)
  [ "$up" -ge 2 ] && break
  sleep 0.2
done
[ "${up:-0}" -ge 2 ] || die "agents did not register, see $EMBODY_HOME/logs/agent-*.log"
embody nodes

say "Submitting the demo training job (2 ranks over node-a and node-b)"
job=$(embody submit "$repo/deploy/examples/demo-train.json")
echo "    job $job"
status=0
embody watch "$job" || status=$?

ckpt=$(embody show "$job" | sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' | head -n 1)
echo
if [ "$status" -eq 0 ]; then
  say "Demo job $job succeeded"
else
  say "Demo job $job did not succeed: embody logs $job"
fi
cat <<MSG
  checkpoint:  ${ckpt:-none}
  dashboard:   $url/   (sign in with the admin token)
  API:         $url
  admin token: $admin_token
  CLI:         $bin/embody ls   (reads $EMBODY_HOME/env)
  Prometheus:  deploy/prometheus_config.sh --server $url \\
                 --token-file $EMBODY_HOME/bootstrap.json \\
                 --metrics-token-file $metrics_token --out $EMBODY_HOME/prometheus
  datasets:    $datasets   (embody datasets import NAME FILE.hdf5; docs/storage.md)
  logs:        $EMBODY_HOME/logs/
  stop:        ./deploy/quickstart.sh stop
MSG
exit "$status"
