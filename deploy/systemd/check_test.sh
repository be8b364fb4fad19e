#!/usr/bin/env bash
# ctest `systemd_units_check`: the shipped systemd units and env files are well formed and name
# only flags the binaries have.
#   1. every ${VAR} / $VAR a unit's ExecStart uses is set in its env file;
#   2. `systemd-analyze verify` accepts each unit, with /usr/local/bin replaced by the built
#      binaries and /etc/embody by copies of the env files (skipped, exit 77, where
#      systemd-analyze is missing);
#   3. every --flag in a unit, an env file's values or its commented examples appears in the
#      binary's --help (and a made-up flag does not, so the check can fail).
# Usage: check_test.sh WORK_DIR BIN_DIR
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: check_test.sh WORK_DIR BIN_DIR}
bin=${2:?usage: check_test.sh WORK_DIR BIN_DIR}
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"

# 3 first: it needs no systemd.
flags_of() {  # flags written in a unit's ExecStart, or anywhere in an env file
  local file=$1
  if [[ $file == *.service ]]; then
    grep '^ExecStart=' "$file" | grep -oE '(^|[ ])--[a-z0-9-]+' | tr -d ' '
  else
    grep -oE '(^|[ =])--[a-z0-9-]+' "$file" | tr -d ' ='
  fi
}
has_flag() {  # has_flag HELP_TEXT FLAG
  grep -qE -- "(^|[ ,])$2([ =,]|\$)" <<<"$1"
}
for name in server agent; do
  exe="$bin/embody-$name"
  [ -x "$exe" ] || fail "$exe is not built"
  help=$("$exe" --help)
  has_flag "$help" --no-such-flag-here && fail "the flag check cannot fail: --no-such-flag-here found"
  checked=0
  for file in "$here/embody-$name.service" "$here/embody-$name.env"; do
    for flag in $(flags_of "$file"); do
      has_flag "$help" "$flag" || fail "$(basename "$file") passes $flag, which embody-$name --help does not list"
      checked=$((checked + 1))
    done
  done
  [ "$checked" -ge 3 ] || fail "only $checked flags found for embody-$name: the extraction is broken"
  echo "embody-$name: $checked flags checked against --help"

  # 1. Variables used on the command line are set in the env file.
  for var in $(grep '^ExecStart=' "$here/embody-$name.service" | grep -oE '\$\{?[A-Z_]+' | tr -d '${'); do
    grep -qE "^$var=" "$here/embody-$name.env" ||
      fail "embody-$name.service uses \$$var, which embody-$name.env does not set"
  done
done

# 2. systemd's own check.
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not found (Debian package systemd): unit verification skipped"
  exit 77
fi
units=()
for name in server agent; do
  cp "$here/embody-$name.env" "$work/embody-$name.env"
  sed -e "s|/usr/local/bin/|$bin/|g" \
      -e "s|^EnvironmentFile=/etc/embody/$name.env|EnvironmentFile=$work/embody-$name.env|" \
      "$here/embody-$name.service" >"$work/embody-$name.service"
  grep -q "^EnvironmentFile=$work/" "$work/embody-$name.service" || fail "EnvironmentFile not replaced"
  units+=("$work/embody-$name.service")
done
# Warnings about our own files (unknown keys, bad values) fail the check as errors do; notes
# about other units on this machine do not.
set +e
out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "${units[@]}" 2>&1)
rc=$?
set -e
echo "$out"
[ "$rc" = 0 ] || fail "systemd-analyze verify exited $rc"
if grep -E "embody-(server|agent)\.service" <<<"$out"; then
  fail "systemd-analyze verify warns about the units above"
fi
echo "systemd-analyze verify: both units accepted"
