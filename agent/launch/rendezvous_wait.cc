// Probing the rendezvous endpoint (agent/launch/rendezvous_wait.h).
#include "agent/launch/rendezvous_wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace agent {
namespace {

bool ParsePort(const char* text, in_port_t* port) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long n = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || n <= 0 || n > 65535) return false;
  *port = htons(static_cast<in_port_t>(n));
  return true;
}

// One probe: 0 accepted, else the errno of the failure (ETIMEDOUT when the deadline came first).
int Probe(const sockaddr* addr, socklen_t len, long long deadline_ms, ConnectFunction connect_fn) {
  int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (connect_fn(fd, addr, len) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      // Another node: the answer (accept or reset) comes back over the network.
      long long left = deadline_ms - MonotonicMs();
      pollfd p{fd, POLLOUT, 0};
      int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
      socklen_t size = sizeof err;
      if (ready <= 0) {
        err = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &size) != 0) {
        err = errno;
      }
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

long long MonotonicMs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

bool IsRendezvousEndpoint(const sockaddr* addr, socklen_t len, const char* master_addr,
                          const char* master_port) {
  in_port_t port = 0;
  if (addr == nullptr || master_addr == nullptr || !ParsePort(master_port, &port)) return false;
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    in_addr want{};
    return in->sin_port == port && ::inet_pton(AF_INET, master_addr, &want) == 1 &&
           in->sin_addr.s_addr == want.s_addr;
  }
  if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (in6->sin6_port != port) return false;
    in6_addr want{};
    if (::inet_pton(AF_INET6, master_addr, &want) == 1) {
      return memcmp(&in6->sin6_addr, &want, sizeof want) == 0;
    }
    // An IPv4 MASTER_ADDR reached through an IPv6 socket: ::ffff:a.b.c.d.
    in_addr want4{};
    return ::inet_pton(AF_INET, master_addr, &want4) == 1 &&
           IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) &&
           memcmp(&in6->sin6_addr.s6_addr[12], &want4, sizeof want4) == 0;
  }
  return false;
}

RendezvousWait WaitUntilAccepting(const sockaddr* addr, socklen_t len, long long deadline_ms,
                                  int poll_ms, ConnectFunction connect_fn) {
  const int saved_errno = errno;
  RendezvousWait result = RendezvousWait::kOutOfTime;
  while (MonotonicMs() < deadline_ms) {
    const int err = Probe(addr, len, deadline_ms, connect_fn);
    if (err == 0) {
      result = RendezvousWait::kAccepting;
      break;
    }
    if (err == ETIMEDOUT) break;
    if (err != ECONNREFUSED) {
      result = RendezvousWait::kNotRefused;
      break;
    }
    long long left = deadline_ms - MonotonicMs();
    long long nap = left < poll_ms ? left : poll_ms;
    if (nap > 0) {
      timespec t{static_cast<time_t>(nap / 1000), static_cast<long>(nap % 1000) * 1000000};
      while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
      }
    }
  }
  errno = saved_errno;
  return result;
}

}  // namespace agent
