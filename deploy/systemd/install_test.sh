#!/usr/bin/env bash
# ctest `systemd_install_vm_test`: docs/operations.md's install, step by step, on a machine that
# boots systemd (tests/vm/run_in_vm.sh --systemd runs this as root inside one): the build installed
# into /usr/local, PostgreSQL through Debian's own cluster tools and unit, the shipped units and env
# files installed as the guide says, then
#   - embody-server starts under its hardening (user embody, no capabilities, a system-call
#     filter, MemoryDenyWriteExecute, a read-only system) and writes bootstrap.json;
#   - embody-agent starts, gets a cgroup v2 subtree of its own from Delegate=yes, and its node is UP;
#   - a `command` job submitted with the CLI SUCCEEDS, runs as a uid that is not root, inside a
#     cgroup below the agent's, and can read none of the node's secrets (join token, node
#     credential, the server's database password and bootstrap tokens);
#   - `systemctl stop` ends both services cleanly (inactive, not failed) and leaves no job process.
# Usage (inside the machine): install_test.sh BUILD_DIR
set -euo pipefail

build=$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)
step() { echo "== $(date +%T) $*"; }
fail() {
  echo "FAIL: $*"
  for u in embody-server embody-agent; do
    echo "--- journal of $u"
    journalctl -u "$u" --no-pager -n 40 -o cat 2>&1 || true
  done
  exit 1
}
# wait_for SECONDS WHAT COMMAND...: runs COMMAND every second until it succeeds.
wait_for() {
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  while ((SECONDS < end)); do
    if timeout 20 "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  fail "no $what after ${limit} s"
}
[[ $(cat /proc/1/comm) == systemd ]] || { echo "install_test.sh: PID 1 is not systemd" >&2; exit 2; }

step "1. install the build into /usr/local"
cmake --install "$build" --prefix /usr/local >/dev/null
for b in embody-server embody-agent embody-job-exec embody-container-init embody-engine \
         embody-data embody; do
  [[ -x /usr/local/bin/$b ]] || fail "cmake --install did not install $b"
done
[[ -f /usr/local/share/embody/systemd/embody-server.service ]] || fail "no units installed"

step "2. PostgreSQL (Debian's cluster tools and unit), a role and a database for embody"
# A cluster of this machine's own. Whatever clusters the image holds (data and configuration) are
# hidden under empty file systems rather than dropped: on the throwaway machine's overlay root,
# pg_dropcluster deleted each of the image's files through 9p, and took 110 s under emulation.
for d in /var/lib/postgresql /etc/postgresql; do
  mount -t tmpfs -o mode=0755 tmpfs "$d"
  chown postgres:postgres "$d"
done
[[ -z $(pg_lsclusters -h) ]] || fail "the image's PostgreSQL clusters are still visible"
pg_createcluster 15 main >/dev/null
systemctl start postgresql@15-main
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
runuser -u postgres -- psql -q -c "CREATE ROLE embody LOGIN PASSWORD '$password'"
runuser -u postgres -- createdb --owner embody embody

step "3. the server, as the guide installs it"
useradd --system --home-dir /var/lib/embody --shell /usr/sbin/nologin embody
install -d -m 0700 -o embody -g embody /var/lib/embody
install -m 0600 -o embody -g embody /dev/null /var/lib/embody/.pgpass
echo "127.0.0.1:5432:embody:embody:$password" > /var/lib/embody/.pgpass
install -d -m 0755 /etc/embody
install -m 0640 -g embody /usr/local/share/embody/systemd/embody-server.env /etc/embody/server.env
install -m 0644 /usr/local/share/embody/systemd/embody-server.service /etc/systemd/system/
sed -i 's|^EMBODY_LISTEN=.*|EMBODY_LISTEN=127.0.0.1:8080|' /etc/embody/server.env
systemctl daemon-reload
systemctl enable --now embody-server
wait_for 180 "bootstrap.json from the server" test -s /var/lib/embody/server/bootstrap.json
systemctl is-active --quiet embody-server || fail "embody-server is not active"
[[ $(ps -o user= -p "$(systemctl show -p MainPID --value embody-server)") == embody ]] ||
  fail "embody-server does not run as user embody"
admin=$(sed -n 's/.*"admin_token" *: *"\([^"]*\)".*/\1/p' /var/lib/embody/server/bootstrap.json)
agent_token=$(sed -n 's/.*"agent_token" *: *"\([^"]*\)".*/\1/p' /var/lib/embody/server/bootstrap.json)
[[ -n $admin && -n $agent_token ]] || fail "bootstrap.json holds no tokens"
export EMBODY_URL=http://127.0.0.1:8080 EMBODY_TOKEN=$admin
wait_for 60 "ready server" curl -fsS "$EMBODY_URL/readyz"
curl -fsS "$EMBODY_URL/" | grep -qi '<html' || fail "the installed server does not serve the dashboard at /"

step "4. the agent, as the guide installs it"
install -m 0644 /usr/local/share/embody/systemd/embody-agent.env /etc/embody/agent.env
install -m 0644 /usr/local/share/embody/systemd/embody-agent.service /etc/systemd/system/
install -m 0600 /dev/null /etc/embody/agent.token
echo "$agent_token" > /etc/embody/agent.token
sed -i -e 's|^EMBODY_SERVER_URL=.*|EMBODY_SERVER_URL=http://127.0.0.1:8080|' \
       -e 's|^EMBODY_ADDRESS=.*|EMBODY_ADDRESS=127.0.0.1|' \
       -e 's|^EMBODY_AGENT_LISTEN=.*|EMBODY_AGENT_LISTEN=127.0.0.1:9464|' /etc/embody/agent.env
systemctl daemon-reload
systemctl enable --now embody-agent
wait_for 180 "node UP" sh -c 'embody nodes -o json | grep -q "\"state\" *: *\"UP\""'
journalctl -u embody-agent --no-pager -o cat | grep '"job isolation"' | grep -q '"cgroup":"v2"' ||
  fail "the agent did not get a usable cgroup v2 subtree from Delegate=yes"

step "5. a job through the CLI"
spec=$(mktemp)
cat > "$spec" <<'JSON'
{"name": "systemd-check", "kind": "command", "resources": {"nodes": 1, "ranks_per_node": 1},
 "command": ["sh", "-c", "echo uid=$(id -u); echo cgroup=$(cut -d: -f3 /proc/self/cgroup); for f in /etc/embody/agent.token /var/lib/embody/.pgpass /var/lib/embody/server/bootstrap.json /var/lib/embody-agent/node.token; do head -c1 $f >/dev/null 2>&1 && echo read=$f; done; head -c1 /etc/passwd >/dev/null && echo control=read; sleep 1"]}
JSON
id=$(embody submit "$spec")
[[ $id =~ ^[0-9]+$ ]] || fail "embody submit printed '$id'"
timeout 300 embody watch "$id" >/dev/null || fail "job $id did not succeed: $(embody show "$id")"
logs=$(embody logs "$id")
echo "$logs" | sed 's/^/   job: /'
uid=$(echo "$logs" | sed -n 's/.*uid=\([0-9]*\).*/\1/p' | head -1)
[[ -n $uid && $uid != 0 ]] || fail "the job ran as uid '${uid}', not a uid of its own"
# What the tenant's code must not read on a node installed this way: the join token, the
# server's database password and bootstrap tokens, the node's credential.
echo "$logs" | grep -q 'control=read' || fail "the job could not read /etc/passwd: the secrets check means nothing"
if echo "$logs" | grep -q 'read='; then
  fail "the job read secrets of the node: $(echo "$logs" | grep 'read=' | tr '\n' ' ')"
fi
agent_cgroup=$(systemctl show -p ControlGroup --value embody-agent)
echo "$logs" | grep -q "cgroup=$agent_cgroup/" ||
  fail "the job's cgroup is not below the agent's ($agent_cgroup)"

step "6. stop"
systemctl stop embody-agent
systemctl stop embody-server
for u in embody-agent embody-server; do
  state=$(systemctl show -p ActiveState --value "$u")
  result=$(systemctl show -p Result --value "$u")
  [[ $state == inactive && $result == success ]] || fail "$u ended $state ($result)"
done
left=$(ps -eo uid=,comm= | awk -v u="$uid" '$1 == u' || true)
[[ -z $left ]] || fail "processes of the job's uid outlived the agent: $left"
systemctl stop postgresql@15-main
echo "PASS: installed by docs/operations.md, both units ran under systemd and a job succeeded"
