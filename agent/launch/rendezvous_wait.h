// The wait that keeps a torch.distributed rank's first connection to rank 0's store from being
// refused. torch 1.13's TCPStore client, refused, sleeps a whole second before it tries again;
// under the default launcher every rank starts at once and imports torch (about a second), so a
// rank that reaches its connect before rank 0's store listens loses that second, in one start of
// two on our 2-node bench. The SDK's torchrun wrapper waits for the store before torchrun starts
// (sdk/python/embody/torchrun.py); for the default launcher the wait is in the rank's own
// process: exec-rank preloads libembody-rendezvous-wait.so (rendezvous_preload.cc) into every
// rank but 0, whose connect() to MASTER_ADDR:MASTER_PORT first probes that endpoint until it
// accepts (a refused probe is retried every few milliseconds) and only then connects. A program
// that never connects there pays nothing; one that does waits only while it is refused, and at
// most the budget, after which its own connect goes ahead as it would have.
//
// Plain C library calls only: the same code runs inside any program the job starts.
#pragma once

#include <sys/socket.h>

namespace agent {

// Whether `addr` is the rendezvous endpoint: `master_addr` (a numeric IPv4 or IPv6 address, as
// the agent sets MASTER_ADDR) and `master_port` (decimal). A host name never matches: the wait
// is skipped rather than resolved inside a connect().
bool IsRendezvousEndpoint(const sockaddr* addr, socklen_t len, const char* master_addr,
                          const char* master_port);

enum class RendezvousWait {
  kAccepting,   // a probe connection was accepted
  kOutOfTime,   // still refused (or unanswered) when the deadline came
  kNotRefused,  // failed for another reason (unreachable, no socket, ...): waiting will not help
};

using ConnectFunction = int (*)(int, const sockaddr*, socklen_t);

// Probes `addr` with connections of its own (made by `connect_fn`, closed at once) until one is
// accepted, retrying a refused one every `poll_ms`, until `deadline_ms` of CLOCK_MONOTONIC
// (MonotonicMs()). Keeps errno.
RendezvousWait WaitUntilAccepting(const sockaddr* addr, socklen_t len, long long deadline_ms,
                                  int poll_ms, ConnectFunction connect_fn);

long long MonotonicMs();

}  // namespace agent
