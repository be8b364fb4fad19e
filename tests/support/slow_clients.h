// Clients that hold a server's connections without finishing a request, for the tests that
// check idle and slow clients cannot starve the workers: idle connections that send nothing,
// and "slow loris" ones that send a request's headers one byte at a time and never finish them.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace embody_test {

// A TCP connection to 127.0.0.1:`port`, or -1.
int ConnectLoopback(int port);

// Reads plain bytes from `fd` until the peer closes (or resets) or `wait_s` passes; `closed`
// says which.
std::string ReadUntilClosed(int fd, double wait_s, bool* closed);

class SlowClients {
 public:
  // `idle` connections that send nothing and `loris` that send "GET `path` HTTP/1.1" and
  // headers, one byte every `byte_interval`, never ending them. Stopped and closed on destruction.
  SlowClients(int port, int idle, int loris, const std::string& path,
              std::chrono::milliseconds byte_interval);
  ~SlowClients();
  SlowClients(const SlowClients&) = delete;
  SlowClients& operator=(const SlowClients&) = delete;
  int idle_fd(size_t i) const { return idle_fds_.at(i); }
  int loris_fd(size_t i) const { return loris_fds_.at(i); }

 private:
  std::vector<int> idle_fds_, loris_fds_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace embody_test
