#!/usr/bin/env bash
# A private PostgreSQL cluster in a data directory this script owns, on loopback only.
#
#   pg_cluster.sh start DATADIR [PORT]   initialises (once) and starts; prints the conninfo
#   pg_cluster.sh stop DATADIR [MODE]    stops it: MODE fast (the default: sessions ended, a
#                                        checkpoint written) or immediate (for a cluster about
#                                        to be removed: nothing written, no wait for the disk)
#   pg_cluster.sh status DATADIR         exit 0 when running
#
# PG_CLUSTER_THROWAWAY=1 (tests' clusters, removed after use): initdb does not wait for its files
# to reach the disk (--no-sync), which is most of its time. The running cluster fsyncs as usual.
#
# The cluster has one superuser `embody` and one database `embody`; it listens on 127.0.0.1 and a
# socket inside DATADIR, with trust authentication limited to those. initdb refuses to run as root,
# so as root the cluster belongs to the `postgres` user.
set -euo pipefail

usage() { echo "usage: $0 start DATADIR [PORT] | stop DATADIR [fast|immediate] | status DATADIR" >&2; exit 2; }
cmd=${1:-}
datadir=${2:-}
[ -n "$cmd" ] && [ -n "$datadir" ] || usage

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bindir/initdb" ] || { echo "pg_cluster: PostgreSQL server binaries not found (run deploy/setup.sh)" >&2; exit 1; }

# A loopback port nothing listens on, picked at random below the kernel's ephemeral range: a port
# in that range may be the local end of some client's connection, which a connect probe finds
# closed but which postgres then cannot bind (under parallel tests, a stack start that failed at
# once). Another process may still take the port before postgres binds it: start retries.
free_port() {
  local p lo=32768
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 11024 ] || lo=32768
  for _ in $(seq 1 200); do
    p=$((10000 + RANDOM % (lo - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  echo "pg_cluster: no free port found" >&2; return 1
}

# From / when run as root: postgres may not enter the caller's directory (a 0700 home), and
# pg_ctl would say so on every call. Every path given here is absolute.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

mkdir -p "$datadir"
datadir=$(cd "$datadir" && pwd)
pgdata="$datadir/pgdata"
sockdir="$datadir/sock"

case "$cmd" in
  start)
    port=${3:-}
    if [ -z "$port" ] && [ -f "$datadir/port" ]; then port=$(cat "$datadir/port"); fi
    picked=0
    if [ -z "$port" ]; then
      port=$(free_port)
      picked=1
    fi
    if [ "$(id -u)" -eq 0 ]; then
      chown postgres:postgres "$datadir"
      # postgres must be able to reach the directory through its parents.
      if ! runuser -u postgres -- test -x "$datadir"; then
        echo "pg_cluster: user postgres cannot reach $datadir; use a directory whose parents are world-executable" >&2
        exit 1
      fi
    fi
    mkdir -p "$sockdir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$sockdir"
    if [ ! -f "$pgdata/PG_VERSION" ]; then
      initdb_args=(-D "$pgdata" -U embody --auth=trust -E UTF8 --no-locale)
      if [ "${PG_CLUSTER_THROWAWAY:-0}" = 1 ]; then initdb_args+=(--no-sync); fi
      as_owner "$bindir/initdb" "${initdb_args[@]}" >"$datadir/initdb.log" 2>&1 ||
        { echo "pg_cluster: initdb failed, see $datadir/initdb.log" >&2; exit 1; }
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
      for attempt in 1 2 3 4 5; do
        echo "$port" >"$datadir/port"
        : >"$datadir/postgres.log"
        [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$datadir/postgres.log"
        if as_owner "$bindir/pg_ctl" -D "$pgdata" -l "$datadir/postgres.log" -w -t 60 \
            -o "-p $port -c listen_addresses=127.0.0.1 -k $sockdir -c fsync=on -c max_connections=200" \
            start >/dev/null; then
          break
        fi
        # A port this script picked and someone took first: pick another. Anything else fails.
        if [ "$picked" -eq 1 ] && [ "$attempt" -lt 5 ] &&
            grep -q "could not bind\|could not create any TCP/IP sockets" "$datadir/postgres.log"; then
          echo "pg_cluster: port $port was taken, trying another" >&2
          port=$(free_port)
          continue
        fi
        echo "pg_cluster: start failed, see $datadir/postgres.log" >&2; exit 1
      done
    fi
    if ! "$bindir/psql" -h 127.0.0.1 -p "$port" -U embody -d postgres -Atqc \
        "SELECT 1 FROM pg_database WHERE datname='embody'" | grep -q 1; then
      "$bindir/psql" -h 127.0.0.1 -p "$port" -U embody -d postgres -qc "CREATE DATABASE embody" >/dev/null
    fi
    echo "host=127.0.0.1 port=$port user=embody dbname=embody"
    ;;
  stop)
    mode=${3:-fast}
    case "$mode" in fast|immediate) ;; *) echo "pg_cluster: stop mode is fast or immediate, not $mode" >&2; exit 2 ;; esac
    if [ -f "$pgdata/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
      as_owner "$bindir/pg_ctl" -D "$pgdata" -m "$mode" -w stop >/dev/null
    fi
    ;;
  status)
    as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1
    ;;
  *)
    usage ;;
esac
