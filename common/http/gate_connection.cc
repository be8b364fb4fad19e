#include "common/http/gate_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace common::http {

bool WaitFor(int fd, short events, time_t sec, time_t usec) {
  pollfd p{fd, events, 0};
  const int timeout_ms = static_cast<int>(sec * 1000 + usec / 1000);
  for (;;) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

void SocketAddress(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

short GateEvents(const GateConnection& c) {
  // A lingering connection's bytes are dropped unread, TLS or not.
  if (!c.tls || c.lingering || c.tls.want() == 0) return POLLIN;
  return c.tls.want();
}

bool ReadableNow(const GateConnection& c) { return !c.lingering && c.tls.Buffered(); }

ssize_t ReadNow(GateConnection& c, char* buf, size_t size) {
  if (c.tls) return c.tls.Read(buf, size);
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, size, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return TlsSession::kWait;
    return n < 0 ? 0 : n;
  }
}

void SendNow(GateConnection& c, std::string_view data) {
  if (c.tls) {
    // A canned answer is far smaller than the socket's buffer: one write takes it or nothing will.
    if (c.tls.Handshaken()) (void)c.tls.Write(data.data(), data.size());
    return;
  }
  (void)!::send(c.fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ShutWrite(GateConnection& c) {
  c.tls.Shutdown();
  ::shutdown(c.fd, SHUT_WR);
}

void CloseSocket(GateConnection& c) {
  if (c.fd < 0) return;
  c.tls.Shutdown();
  c.tls = TlsSession();
  ::close(c.fd);
  c.fd = -1;
}

bool ClientClosed(GateConnection& c) {
  pollfd p{c.fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  if ((p.revents & POLLIN) == 0) return false;
  if (c.tls) return c.tls.PeerClosed();
  char byte;
  return ::recv(c.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool ConnectionStream::is_readable() const {
  return consumed_ < conn_.pending.size() || conn_.tls.Buffered() ||
         WaitFor(conn_.fd, POLLIN, read_sec_, read_usec_);
}

bool ConnectionStream::is_writable() const {
  return WaitFor(conn_.fd, POLLOUT, write_sec_, write_usec_);
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (consumed_ < conn_.pending.size()) {
    size_t n = std::min(size, conn_.pending.size() - consumed_);
    std::memcpy(ptr, conn_.pending.data() + consumed_, n);
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }
  if (conn_.tls) {
    for (;;) {
      ssize_t n = conn_.tls.Read(ptr, size);
      if (n != TlsSession::kWait) return n;
      if (!WaitFor(conn_.fd, conn_.tls.want(), read_sec_, read_usec_)) return -1;
    }
  }
  if (!WaitFor(conn_.fd, POLLIN, read_sec_, read_usec_)) return -1;
  for (;;) {
    ssize_t n = ::recv(conn_.fd, ptr, size, 0);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  // httplib writes a response's status line and headers in one write, interim 100 Continue
  // apart; that write says how the connection goes on.
  std::string_view head(ptr, size);
  if (!response_seen_ && head.rfind("HTTP/1.", 0) == 0 && head.substr(8, 5) != " 100 ") {
    response_seen_ = true;
    const std::string headers(head.substr(0, head.find("\r\n\r\n") + 2));
    const std::string_view status = head.substr(9, 3);
    close_after_ = headers.find("\r\nConnection: close\r\n") != std::string::npos ||
                   status == "411" || status == "413" || status == "414" || status == "415" ||
                   status == "431";
  }
  if (size == 0) return 0;
  if (conn_.tls) {
    for (;;) {
      ssize_t n = conn_.tls.Write(ptr, size);
      if (n > 0) return n;
      if (n == 0) return -1;
      if (!WaitFor(conn_.fd, conn_.tls.want(), write_sec_, write_usec_)) return -1;
    }
  }
  if (!is_writable()) return -1;
  for (;;) {
    ssize_t n = ::send(conn_.fd, ptr, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(conn_.fd, true, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(conn_.fd, false, ip, port);
}

}  // namespace common::http
