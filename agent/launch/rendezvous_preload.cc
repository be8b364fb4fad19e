// libembody-rendezvous-wait.so: the connect() that exec-rank preloads (LD_PRELOAD) into a
// default-launcher rank other than 0 (agent/launch/rendezvous_wait.h says why). A connect() to
// MASTER_ADDR:MASTER_PORT, as the environment says at the time of the call, first waits until
// that endpoint accepts: at most kBudgetMs for the whole process, counted from its first such
// connect(), and only until a probe was once accepted; then, and for every other address, it is
// libc's connect() unchanged. Nothing here allocates or prints.
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "agent/launch/rendezvous_wait.h"

namespace {

// As long as the SDK's torchrun wrapper waits for the first node's store.
constexpr long long kBudgetMs = 60'000;
constexpr int kPollMs = 10;

// 0: not waited yet; otherwise the deadline of this process's wait. kDone once a probe was
// accepted or the deadline passed.
constexpr long long kDone = -1;
long long wait_deadline_ms = 0;

// Looked up once; two threads racing here both find the same function. (No function-local
// static: its guard would need the C++ runtime.)
agent::ConnectFunction libc_connect = nullptr;

agent::ConnectFunction LibcConnect() {
  agent::ConnectFunction real = __atomic_load_n(&libc_connect, __ATOMIC_ACQUIRE);
  if (real == nullptr) {
    real = reinterpret_cast<agent::ConnectFunction>(::dlsym(RTLD_NEXT, "connect"));
    __atomic_store_n(&libc_connect, real, __ATOMIC_RELEASE);
  }
  return real;
}

void AwaitRendezvous(const sockaddr* addr, socklen_t len, agent::ConnectFunction real) {
  long long deadline = __atomic_load_n(&wait_deadline_ms, __ATOMIC_ACQUIRE);
  if (deadline == kDone) return;
  if (!agent::IsRendezvousEndpoint(addr, len, ::getenv("MASTER_ADDR"), ::getenv("MASTER_PORT"))) {
    return;
  }
  if (deadline == 0) {
    long long mine = agent::MonotonicMs() + kBudgetMs;
    if (__atomic_compare_exchange_n(&wait_deadline_ms, &deadline, mine, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      deadline = mine;
    }
    if (deadline == kDone) return;
  }
  agent::WaitUntilAccepting(addr, len, deadline, kPollMs, real);
  // Accepted, out of time or failing otherwise: no later connect() waits.
  __atomic_store_n(&wait_deadline_ms, kDone, __ATOMIC_RELEASE);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int connect(int fd, const sockaddr* addr,
                                                              socklen_t len) {
  agent::ConnectFunction real = LibcConnect();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  AwaitRendezvous(addr, len, real);
  return real(fd, addr, len);
}
