#!/usr/bin/env bash
# Installs what Embody needs to build and test on Debian 12, from Debian's packages only (the
# dashboard's npm packages come from web/package-lock.json at build time).
# oneDNN's CMake package (libdnnl-dev) looks for OpenCL, which apt only recommends: it is named.
# `--test` adds what only the tests need.
# crun runs a command job's OCI image and umoci unpacks it, and skopeo pulls one from a registry
# the operator configured (docs/byo.md, "Environments"). nft confines each job's network to its
# agent and its peers (agent/sandbox/job_network.h).
# Idempotent: packages already present are not touched, and apt is not called at all when
# nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates curl procps psmisc
  libcpp-httplib-dev nlohmann-json3-dev prometheus-cpp-dev
  libpq-dev postgresql postgresql-contrib
  libboost-dev libboost-system-dev
  libopenmpi-dev openmpi-bin
  libeigen3-dev libdnnl-dev ocl-icd-opencl-dev libssl-dev zlib1g-dev libbrotli-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcli11-dev libyaml-cpp-dev
  libhdf5-dev
  libsnappy-dev libzstd-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  prometheus
  chromium
  clang libclang-rt-dev
  crun umoci skopeo
  nftables
)
# With --test (deploy/test.sh): what only the tests need. tests/vm/run_in_vm.sh boots a Debian
# kernel under qemu to run the agent's cgroup v2 path where the host mounts cgroup v1; on a Debian
# host linux-image-amd64 is normally there already. The multi-node test makes network namespaces
# (iproute2, ping); an engine test runs a step under valgrind, whose CPU has no AVX-512. The same
# virtual machine boots the host's systemd for the units' install test. bench/wrk_submit.sh
# drives the server with wrk. The Python SDK's embody.data is tested with Debian's numpy, and a
# user's PyTorch DDP script across two nodes with Debian's torch. bench/lerobot_bench decodes the
# same videos with FFmpeg's own command line (ffmpeg) as the floor its import is measured against.
# The registry image test pulls from Debian's docker-registry (the Distribution registry v2).
if [[ "${1:-}" == "--test" ]]; then
  packages+=(qemu-system-x86 linux-image-amd64 busybox-static cpio kmod iproute2 iputils-ping valgrind
             wrk python3-numpy python3-torch ffmpeg docker-registry)
fi
# The dashboard's build needs Node.js and npm; a machine that has them from elsewhere (a newer
# Node) keeps its own.
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Only promtool and a Prometheus the tests start themselves are wanted: where apt just started
# Debian's system service (systemd without a policy-rc.d refusing it), stop and disable it.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null &&
  systemctl is-active --quiet prometheus 2>/dev/null; then
  $SUDO systemctl disable --now prometheus
fi
