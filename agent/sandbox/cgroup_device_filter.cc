#include "agent/sandbox/cgroup_device_filter.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace agent {
namespace {

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn insn;
  std::memset(&insn, 0, sizeof(insn));
  insn.code = code;
  insn.dst_reg = dst & 0xf;
  insn.src_reg = src & 0xf;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

// dst = *(u32*)(src + off)
bpf_insn LoadWord(uint8_t dst, uint8_t src, int16_t off) {
  return Insn(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0);
}
// if dst <op> imm: skip `off` instructions
bpf_insn JumpImm(uint8_t op, uint8_t dst, int32_t imm, int16_t off) {
  return Insn(BPF_JMP | op | BPF_K, dst, 0, off, imm);
}
bpf_insn Return(int32_t value) { return Insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, value); }
bpf_insn Exit() { return Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

uint64_t Pointer(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

long Bpf(int cmd, bpf_attr* attr) { return ::syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

// The verifier's last words: a refused program's reason is at the end of its log.
std::string LogTail(const std::vector<char>& log) {
  std::string text(log.data(), ::strnlen(log.data(), log.size()));
  constexpr size_t kKeep = 1500;
  if (text.size() > kKeep) text = "..." + text.substr(text.size() - kKeep);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Returns the program's descriptor, or -1 with `error` set. Loads without a log first (a log
// buffer that overflows fails even a good program), and only to explain a refusal again with one.
int LoadProgram(const std::vector<bpf_insn>& program, std::string* error) {
  static const char kLicense[] = "GPL";
  std::vector<char> log;
  for (int attempt = 0; attempt < 6; ++attempt) {
    bool with_log = attempt > 0 && !log.empty();
    bpf_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insn_cnt = static_cast<uint32_t>(program.size());
    attr.insns = Pointer(program.data());
    attr.license = Pointer(kLicense);
    if (with_log) {
      std::fill(log.begin(), log.end(), '\0');
      attr.log_level = 1;
      attr.log_buf = Pointer(log.data());
      attr.log_size = static_cast<uint32_t>(log.size());
    }
    int fd = static_cast<int>(Bpf(BPF_PROG_LOAD, &attr));
    if (fd >= 0) return fd;
    int err = errno;
    if (err == EAGAIN) continue;  // the verifier was interrupted; libbpf retries alike
    if (!with_log && (err == EINVAL || err == EACCES)) {
      log.assign(64 << 10, '\0');  // EINVAL/EACCES: the verifier refused it; ask it why
      continue;
    }
    *error = std::string("bpf(BPF_PROG_LOAD) of a cgroup device program: ") + std::strerror(err);
    if (err == EPERM) *error += " (needs CAP_BPF or CAP_SYS_ADMIN)";
    std::string tail = with_log ? LogTail(log) : "";
    if (!tail.empty()) *error += "; verifier: " + tail;
    return -1;
  }
  *error = "bpf(BPF_PROG_LOAD) of a cgroup device program: interrupted again and again";
  return -1;
}

}  // namespace

common::Result<std::vector<bpf_insn>> GpuDenyProgram(const std::vector<int>& minors) {
  if (minors.size() > kMaxDeniedMinors) {
    return common::InvalidArgument("a device program denies at most " +
                                   std::to_string(kMaxDeniedMinors) + " GPUs, not " +
                                   std::to_string(minors.size()));
  }
  for (int m : minors) {
    if (m < 0 || m > kMaxDeviceMinor) {
      return common::InvalidArgument("GPU minor " + std::to_string(m) +
                                     " is not a device minor (0.." +
                                     std::to_string(kMaxDeviceMinor) + ")");
    }
  }
  std::vector<bpf_insn> p;
  if (minors.empty()) {
    // Nothing to deny (and a deny block nothing jumps to would be refused as unreachable).
    p.push_back(Return(1));
    p.push_back(Exit());
    return p;
  }
  const int n = static_cast<int>(minors.size());
  // r1 is the context, struct bpf_cgroup_dev_ctx: r2 = device type, r3 = major, r4 = minor.
  p.push_back(LoadWord(BPF_REG_2, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, access_type)));
  p.push_back(Insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff));  // low half: the type
  p.push_back(LoadWord(BPF_REG_3, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, major)));
  p.push_back(LoadWord(BPF_REG_4, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, minor)));
  // Layout from here: [4] type check, [5] major check, [6, 6+n) one check per minor,
  // [6+n] allow, [8+n] deny. A jump at index i with offset off lands at i + 1 + off.
  const int allow = 6 + n, deny = 8 + n;
  auto to = [](int from, int target) { return static_cast<int16_t>(target - from - 1); };
  p.push_back(JumpImm(BPF_JNE, BPF_REG_2, BPF_DEVCG_DEV_CHAR, to(4, allow)));
  p.push_back(JumpImm(BPF_JNE, BPF_REG_3, static_cast<int32_t>(kNvidiaMajor), to(5, allow)));
  for (int i = 0; i < n; ++i) {
    p.push_back(JumpImm(BPF_JEQ, BPF_REG_4, minors[i], to(6 + i, deny)));
  }
  p.push_back(Return(1));
  p.push_back(Exit());
  p.push_back(Return(0));
  p.push_back(Exit());
  return p;
}

common::Status AttachDeviceProgram(const std::string& cgroup_dir,
                                   const std::vector<bpf_insn>& program) {
  if (program.empty() || program.size() > BPF_MAXINSNS) {
    return common::InvalidArgument("a device program of " + std::to_string(program.size()) +
                                   " instructions");
  }
  int dir_fd = ::open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return common::Internal("open " + cgroup_dir + ": " + std::strerror(errno));
  std::string error;
  int prog_fd = LoadProgram(program, &error);
  if (prog_fd < 0) {
    ::close(dir_fd);
    return common::Internal(error);
  }
  bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.target_fd = static_cast<uint32_t>(dir_fd);
  attr.attach_bpf_fd = static_cast<uint32_t>(prog_fd);
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  long rc = Bpf(BPF_PROG_ATTACH, &attr);
  int err = errno;
  ::close(prog_fd);  // the attachment holds its own reference
  ::close(dir_fd);
  if (rc != 0) {
    return common::Internal("bpf(BPF_PROG_ATTACH) of a device program to " + cgroup_dir + ": " +
                            std::strerror(err));
  }
  return common::Status::Ok();
}

}  // namespace agent
