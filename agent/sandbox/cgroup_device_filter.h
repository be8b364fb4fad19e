// The cgroup v2 stand-in for the v1 devices controller's deny list: a BPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE, attached to a job's cgroup, that the kernel runs on every open
// (and mknod) of a device node by a process inside it. Ours denies the NVIDIA GPUs that are not
// the job's (/dev/nvidiaN, character device 195:N) and allows everything else; other programs on
// the way up (systemd's, a container runtime's) still run, and an access passes only if all
// allow it.
//
// Built on the bpf(2) system call and <linux/bpf.h> alone: the program is a dozen instructions
// plus one per denied GPU, encoded here, so there is no libbpf and no compiled object to ship.
// This is not a general device policy: the job keeps every other device its sandbox gives it.
#pragma once

#include <linux/bpf.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

// The major number of /dev/nvidia0.. (and of nvidiactl, minor 255, which every CUDA process
// needs and which a deny list therefore never names).
constexpr uint32_t kNvidiaMajor = 195;
// A program per job stays small and its verification quick; far more than a node has GPUs.
constexpr size_t kMaxDeniedMinors = 1024;
// Linux numbers minors in 20 bits (MINORBITS): nothing larger names a device.
constexpr int kMaxDeviceMinor = (1 << 20) - 1;

// The instructions of a device program that returns 0 (deny) for any access to the character
// devices 195:N with N in `minors` and 1 (allow) for every other access. Duplicates are kept (they
// are harmless). Refuses, with InvalidArgument, more than kMaxDeniedMinors minors or a minor
// outside 0..kMaxDeviceMinor.
common::Result<std::vector<bpf_insn>> GpuDenyProgram(const std::vector<int>& minors);

// Loads `program` as a BPF_PROG_TYPE_CGROUP_DEVICE program and attaches it to the cgroup v2
// directory `cgroup_dir` (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI: it runs beside, never instead of,
// programs attached above). The attachment keeps the program alive until the cgroup is removed;
// no descriptor is left open. Errors (a kernel without cgroup BPF, a caller without CAP_BPF or
// CAP_SYS_ADMIN, a program the verifier refuses, with its log) come back as Internal.
common::Status AttachDeviceProgram(const std::string& cgroup_dir,
                                   const std::vector<bpf_insn>& program);

}  // namespace agent
