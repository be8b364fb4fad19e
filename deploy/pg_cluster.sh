#!/usr/bin/env bash
# A private PostgreSQL cluster in a data directory this script owns, on loopback only.
#
#   pg_cluster.sh start DATADIR [PORT]   initialises (once) and starts; prints the conninfo
#   pg_cluster.sh stop DATADIR           stops it (fast shutdown)
#   pg_cluster.sh status DATADIR         exit 0 when running
#
# The cluster has one superuser `embody` and one database `embody`; it listens on 127.0.0.1 and a
# socket inside DATADIR, with trust authentication limited to those. initdb refuses to run as root,
# so as root the cluster belongs to the `postgres` user.
set -euo pipefail

cmd=${1:-}
datadir=${2:-}
[ -n "$cmd" ] && [ -n "$datadir" ] || { echo "usage: $0 start|stop|status DATADIR [PORT]" >&2; exit 2; }

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bindir/initdb" ] || { echo "pg_cluster: PostgreSQL server binaries not found (run deploy/setup.sh)" >&2; exit 1; }

# A loopback port nothing listens on, picked at random in the dynamic range.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  echo "pg_cluster: no free port found" >&2; return 1
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

mkdir -p "$datadir"
datadir=$(cd "$datadir" && pwd)
pgdata="$datadir/pgdata"
sockdir="$datadir/sock"

case "$cmd" in
  start)
    port=${3:-}
    if [ -z "$port" ] && [ -f "$datadir/port" ]; then port=$(cat "$datadir/port"); fi
    if [ -z "$port" ]; then
      port=$(free_port)
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
      as_owner "$bindir/initdb" -D "$pgdata" -U embody --auth=trust -E UTF8 --no-locale >"$datadir/initdb.log" 2>&1 ||
        { echo "pg_cluster: initdb failed, see $datadir/initdb.log" >&2; exit 1; }
    fi
    echo "$port" >"$datadir/port"
    if as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
      :
    else
      as_owner "$bindir/pg_ctl" -D "$pgdata" -l "$datadir/postgres.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $sockdir -c fsync=on -c max_connections=200" \
        start >/dev/null || { echo "pg_cluster: start failed, see $datadir/postgres.log" >&2; exit 1; }
    fi
    if ! "$bindir/psql" -h 127.0.0.1 -p "$port" -U embody -d postgres -Atqc \
        "SELECT 1 FROM pg_database WHERE datname='embody'" | grep -q 1; then
      "$bindir/psql" -h 127.0.0.1 -p "$port" -U embody -d postgres -qc "CREATE DATABASE embody" >/dev/null
    fi
    echo "host=127.0.0.1 port=$port user=embody dbname=embody"
    ;;
  stop)
    if [ -f "$pgdata/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
      as_owner "$bindir/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
    fi
    ;;
  status)
    as_owner "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1
    ;;
  *)
    echo "usage: $0 start|stop|status DATADIR [PORT]" >&2; exit 2 ;;
esac
