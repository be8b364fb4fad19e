// Idle and slow-loris clients on loopback (tests/support/slow_clients.h).
#include "tests/support/slow_clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

namespace embody_test {

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

SlowClients::SlowClients(int port, int idle, int loris, const std::string& path,
                         std::chrono::milliseconds byte_interval) {
  for (int i = 0; i < idle; ++i) idle_fds_.push_back(ConnectLoopback(port));
  for (int i = 0; i < loris; ++i) loris_fds_.push_back(ConnectLoopback(port));
  thread_ = std::thread([this, path, byte_interval] {
    const std::string header = "GET " + path + " HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t i = 0; !done_; ++i) {
      for (int fd : loris_fds_) {
        char c = i < header.size() ? header[i] : 'a';
        if (fd >= 0) (void)::send(fd, &c, 1, MSG_NOSIGNAL);
      }
      std::this_thread::sleep_for(byte_interval);
    }
  });
}

SlowClients::~SlowClients() {
  done_ = true;
  thread_.join();
  for (int fd : idle_fds_) {
    if (fd >= 0) ::close(fd);
  }
  for (int fd : loris_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::string ReadUntilClosed(int fd, double wait_s, bool* closed) {
  timeval tv{static_cast<time_t>(wait_s), static_cast<suseconds_t>((wait_s - int(wait_s)) * 1e6)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  *closed = false;
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) *closed = true;  // closed, or reset
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

}  // namespace embody_test
