#include "agent/launch/rendezvous_wait.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace agent {
namespace {

using Clock = std::chrono::steady_clock;

long long MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

sockaddr_in Loopback(in_port_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A loopback port bound but not listening: connections to it are refused until Listen().
class Endpoint {
 public:
  Endpoint() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(0);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~Endpoint() { ::close(fd_); }
  void Listen() { ASSERT_EQ(::listen(fd_, 16), 0); }
  in_port_t port() const { return port_; }
  sockaddr_in address() const { return Loopback(port_); }

 private:
  int fd_ = -1;
  in_port_t port_ = 0;
};

const sockaddr* Raw(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

TEST(RendezvousEndpointTest, MatchesMasterAddressAndPortOnly) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(29500);
  ASSERT_EQ(::inet_pton(AF_INET, "10.1.2.3", &a.sin_addr), 1);
  EXPECT_TRUE(IsRendezvousEndpoint(Raw(a), sizeof a, "10.1.2.3", "29500"));
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, "10.1.2.4", "29500"));
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, "10.1.2.3", "29501"));
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, "head.example", "29500"));  // never resolved
  for (const char* port : {"", "0", "65536", "29500x", "-1"}) {
    EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, "10.1.2.3", port)) << port;
  }
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, nullptr, "29500"));
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a, "10.1.2.3", nullptr));
  EXPECT_FALSE(IsRendezvousEndpoint(Raw(a), sizeof a - 1, "10.1.2.3", "29500"));  // short

  sockaddr_in6 b{};
  b.sin6_family = AF_INET6;
  b.sin6_port = htons(29500);
  ASSERT_EQ(::inet_pton(AF_INET6, "fd00::7", &b.sin6_addr), 1);
  const auto* raw6 = reinterpret_cast<const sockaddr*>(&b);
  EXPECT_TRUE(IsRendezvousEndpoint(raw6, sizeof b, "fd00::7", "29500"));
  EXPECT_FALSE(IsRendezvousEndpoint(raw6, sizeof b, "fd00::8", "29500"));
  ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:10.1.2.3", &b.sin6_addr), 1);
  EXPECT_TRUE(IsRendezvousEndpoint(raw6, sizeof b, "10.1.2.3", "29500"));
  EXPECT_FALSE(IsRendezvousEndpoint(raw6, sizeof b, "10.1.2.9", "29500"));
}

TEST(RendezvousWaitTest, ReturnsSoonAfterTheEndpointStartsListening) {
  Endpoint store;
  const sockaddr_in a = store.address();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store.Listen();
  });
  const auto start = Clock::now();
  errno = EDOM;
  const RendezvousWait r =
      WaitUntilAccepting(Raw(a), sizeof a, MonotonicMs() + 5000, 10, &::connect);
  const long long waited = MsSince(start);
  later.join();
  EXPECT_EQ(r, RendezvousWait::kAccepting);
  EXPECT_EQ(errno, EDOM);  // the caller's errno is kept
  EXPECT_GE(waited, 290);
  // Event-driven: about one poll interval after the listen, not torch's one-second retry.
  EXPECT_LT(waited, 800);
}

TEST(RendezvousWaitTest, AnEndpointAlreadyListeningCostsOneProbe) {
  Endpoint store;
  store.Listen();
  const sockaddr_in a = store.address();
  const auto start = Clock::now();
  EXPECT_EQ(WaitUntilAccepting(Raw(a), sizeof a, MonotonicMs() + 5000, 10, &::connect),
            RendezvousWait::kAccepting);
  EXPECT_LT(MsSince(start), 200);
}

TEST(RendezvousWaitTest, GivesUpAtTheDeadlineWhenNothingEverListens) {
  Endpoint store;  // never listens
  const sockaddr_in a = store.address();
  const auto start = Clock::now();
  EXPECT_EQ(WaitUntilAccepting(Raw(a), sizeof a, MonotonicMs() + 250, 10, &::connect),
            RendezvousWait::kOutOfTime);
  const long long waited = MsSince(start);
  EXPECT_GE(waited, 240);
  EXPECT_LT(waited, 1000);
  // A deadline already past: no probe at all.
  EXPECT_EQ(WaitUntilAccepting(Raw(a), sizeof a, MonotonicMs() - 1, 10, &::connect),
            RendezvousWait::kOutOfTime);
}

int probes = 0;
int Unreachable(int, const sockaddr*, socklen_t) {
  ++probes;
  errno = EHOSTUNREACH;
  return -1;
}

TEST(RendezvousWaitTest, StopsAtAFailureOtherThanARefusal) {
  const sockaddr_in a = Loopback(9);
  probes = 0;
  const auto start = Clock::now();
  EXPECT_EQ(WaitUntilAccepting(Raw(a), sizeof a, MonotonicMs() + 5000, 10, &Unreachable),
            RendezvousWait::kNotRefused);
  EXPECT_EQ(probes, 1);
  EXPECT_LT(MsSince(start), 200);
}

// The preloaded library itself, loaded into this process: its connect() waits for
// MASTER_ADDR:MASTER_PORT and for nothing else.
TEST(RendezvousPreloadTest, ConnectToTheStoreWaitsAndOthersDoNot) {
  void* lib = ::dlopen(EMBODY_RENDEZVOUS_WAIT, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto wrapped = reinterpret_cast<ConnectFunction>(::dlsym(lib, "connect"));
  ASSERT_NE(wrapped, nullptr);
  ASSERT_NE(wrapped, &::connect);

  Endpoint store, other, gone;
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(store.port()).c_str(), 1);

  // Another endpoint that does not listen: refused at once, as by libc.
  const sockaddr_in o = other.address();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto start = Clock::now();
  EXPECT_EQ(wrapped(fd, Raw(o), sizeof o), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_LT(MsSince(start), 200);
  ::close(fd);

  // The store, listening 300 ms later: the connect waits for it and succeeds.
  const sockaddr_in a = store.address();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store.Listen();
  });
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  start = Clock::now();
  EXPECT_EQ(wrapped(fd, Raw(a), sizeof a), 0) << std::strerror(errno);
  const long long waited = MsSince(start);
  later.join();
  EXPECT_GE(waited, 290);
  EXPECT_LT(waited, 800);
  ::close(fd);

  // Once the store answered, the process never waits again: a store gone is refused at once.
  ::setenv("MASTER_PORT", std::to_string(gone.port()).c_str(), 1);
  const sockaddr_in o2 = gone.address();
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  start = Clock::now();
  EXPECT_EQ(wrapped(fd, Raw(o2), sizeof o2), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_LT(MsSince(start), 200);
  ::close(fd);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
}

}  // namespace
}  // namespace agent
