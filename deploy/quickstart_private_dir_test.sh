#!/usr/bin/env bash
# The quickstart run as root from a clone below a private directory, as a clone in /root is on
# Debian (mode 0700): its demo job must succeed. Jobs run as unprivileged uids, which cannot pass
# such a directory, so the agents must run copies of what those uids execute
# (agent/jobs/job_binaries.h); without them mpirun "could not access or execute" the agent and the demo
# job ends with "exited with code 132".
#
#   quickstart_private_dir_test.sh BIN_DIR
#
# The clone is deploy/ and docs/ of this tree plus BIN_DIR's server, agent, engine, CLI and
# embody-data, all below `private/` (0700) in a temporary directory; it runs
# `deploy/quickstart.sh --no-build`, so nothing is installed or built. Everything it started is
# stopped and removed however the test ends. Exit 77 (skipped) when not root: only a root agent
# runs jobs as other uids.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (jobs run as other uids only for a root agent)"
  exit 77
fi

bin_src=${1:?usage: $0 BIN_DIR}
bin_src=$(cd "$bin_src" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# The quickstart's own defaults, not whatever this shell was pointed at.
unset EMBODY_HOME EMBODY_BUILD_DIR EMBODY_URL EMBODY_TOKEN
# Its PostgreSQL cluster goes with the rest at the end: initdb need not wait for the disk
# (deploy/pg_cluster.sh).
export PG_CLUSTER_THROWAWAY=1

work=$(mktemp -d "${TMPDIR:-/tmp}/embody-quickstart-private.XXXXXX")
# Only `private` keeps others out, as /root does; its parents are as /root's are.
chmod 0755 "$work"
private=$work/private
clone=$private/embody
home=$clone/.embody
sampler_pid=
quickstart_pid=

re_escape() { printf '%s' "$1" | sed 's/[][\.^$*+?(){}|]/\\&/g'; }

cleanup() {
  local rc=$? rundir pid
  set +e
  if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null; fi
  if [ -n "$quickstart_pid" ]; then
    kill "$quickstart_pid" 2>/dev/null
    wait "$quickstart_pid" 2>/dev/null
  fi
  rundir=$(cat "$home/rundir" 2>/dev/null)
  if [ -x "$clone/deploy/quickstart.sh" ] && [ -d "$home" ]; then
    "$clone/deploy/quickstart.sh" stop >/dev/null 2>&1
  fi
  # Whatever a failed stop left: every process of this stack names the clone or its run directory
  # (the run directory is unique to this clone's path) on its command line.
  for dir in "$work" ${rundir:+"$rundir"}; do
    for pid in $(pgrep -f -- "$(re_escape "$dir")/" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  # The quickstart puts what other users must reach in /var/tmp/embody-<hash>/ (or, were the clone
  # reachable, in .embody itself); that is this test's to remove too.
  case "$rundir" in /var/tmp/embody-*) rm -rf "$rundir" ;; esac
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -m 0700 "$private"
mkdir -p "$clone/build/bin"
cp -r "$repo/deploy" "$repo/docs" "$clone/"
for exe in embody-server embody-agent embody-engine embody embody-data; do
  [ -x "$bin_src/$exe" ] || fail "$bin_src/$exe is missing; build it first"
  cp "$bin_src/$exe" "$clone/build/bin/"
done

# The premise: a uid other than root cannot pass the directory, so neither can the jobs'.
[ "$(stat -c %a "$private")" = 700 ] || fail "$private is $(stat -c %a "$private"), not 700"
if runuser -u nobody -- test -x "$clone/build/bin/embody-agent"; then
  fail "nobody can reach $clone/build/bin/embody-agent: the private directory keeps no one out"
fi

# The premise holds for the whole run: a quickstart (or agent) that opened the directory up would
# make the job succeed for the wrong reason.
(
  while :; do
    mode=$(stat -c %a "$private")
    [ "$mode" = 700 ] || echo "$(date +%T) $mode" >>"$work/modes"
    sleep 0.2
  done
) &
sampler_pid=$!

# In the background, so that an interrupt (ctest's, ^C) reaches the trap at once, not when the
# demo job has finished.
(cd "$clone" && exec ./deploy/quickstart.sh --no-build) >"$work/quickstart.log" 2>&1 &
quickstart_pid=$!
status=0
wait "$quickstart_pid" || status=$?
quickstart_pid=
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=
cat "$work/quickstart.log"

show_logs() {
  local f
  for f in "$home"/logs/*.log; do
    echo "--- $f (last 30 lines)"
    tail -n 30 "$f"
  done
}

[ ! -s "$work/modes" ] || fail "$private was not 0700 during the run: $(cat "$work/modes")"
[ "$(stat -c %a "$private")" = 700 ] || fail "$private is $(stat -c %a "$private") after the run"

job=$(sed -n 's/^    job \([0-9][0-9]*\)$/\1/p' "$work/quickstart.log" | head -n 1)
[ -n "$job" ] || { show_logs; fail "the quickstart submitted no demo job (exit $status)"; }

# What the job's end says, whatever the quickstart made of it.
export EMBODY_HOME=$home
embody=$clone/build/bin/embody
state=$("$embody" show "$job" | sed -n 's/^  "state": *"\([A-Z_]*\)".*/\1/p')
if [ "$state" != SUCCEEDED ] || [ "$status" -ne 0 ]; then
  echo "--- embody logs $job (last 40 lines)"
  "$embody" logs "$job" 2>&1 | tail -n 40
  show_logs
  fail "demo job $job is ${state:-unknown} (quickstart exit $status); expected SUCCEEDED"
fi

# It ran where the premise applies: as unprivileged uids, not as root (an agent that cannot
# switch uids runs jobs as its own, which passes any directory).
for node in node-a node-b; do
  log=$home/logs/agent-$node.log
  grep '"job isolation"' "$log" | grep -q '"unprivileged_uid":"true"' ||
    fail "$node ran jobs as its own uid, so the private directory was not in their way"
done

ckpt=$("$embody" show "$job" | sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' | head -n 1)
[ -n "$ckpt" ] && [ -e "$ckpt" ] || fail "demo job $job succeeded without a checkpoint on disk (${ckpt:-none})"

echo "PASS: demo job $job SUCCEEDED from below a 0700 directory (checkpoint $ckpt)"
