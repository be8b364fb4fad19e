#include "controlplane/http/gated_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace controlplane::http {

// One client connection between accept and close.
struct GateConnection {
  int fd = -1;
  std::string pending;  // read by the gate, not yet consumed by a request
  int64_t deadline_ms = 0;
  bool request_started = false;  // some of the next request's bytes have arrived
};

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Where the blank line that ends the headers is, searching from `from`; npos if not there yet.
size_t HeaderEnd(const std::string& s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] != '\n') continue;
    if (i + 1 < s.size() && s[i + 1] == '\n') return i + 2;
    if (i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n') return i + 3;
  }
  return std::string::npos;
}

bool WaitFor(int fd, short events, time_t sec, time_t usec) {
  pollfd p{fd, events, 0};
  const int timeout_ms = static_cast<int>(sec * 1000 + usec / 1000);
  for (;;) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

void Address(int fd, bool peer, std::string& ip, int& port) {
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

// httplib's view of a connection while a worker serves one request: the bytes the gate read
// come first, then the socket, each wait bounded by the server's read and write timeouts.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(GateConnection& conn, time_t read_sec, time_t read_usec, time_t write_sec,
                   time_t write_usec)
      : conn_(conn),
        read_sec_(read_sec),
        read_usec_(read_usec),
        write_sec_(write_sec),
        write_usec_(write_usec) {}

  // What the request left unread (the start of a pipelined next one) stays with the connection.
  ~ConnectionStream() override { conn_.pending.erase(0, consumed_); }

  bool is_readable() const override {
    return consumed_ < conn_.pending.size() || WaitFor(conn_.fd, POLLIN, read_sec_, read_usec_);
  }
  bool is_writable() const override { return WaitFor(conn_.fd, POLLOUT, write_sec_, write_usec_); }

  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ < conn_.pending.size()) {
      size_t n = std::min(size, conn_.pending.size() - consumed_);
      std::memcpy(ptr, conn_.pending.data() + consumed_, n);
      consumed_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!WaitFor(conn_.fd, POLLIN, read_sec_, read_usec_)) return -1;
    for (;;) {
      ssize_t n = ::recv(conn_.fd, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }

  // The response asked the client to close, or refused the request before reading its body,
  // whose bytes would otherwise be read as the next request.
  bool close_after() const { return close_after_; }

  ssize_t write(const char* ptr, size_t size) override {
    // httplib writes a response's status line and headers in one write, interim 100 Continue
    // apart; that write says how the connection goes on.
    std::string_view head(ptr, size);
    if (!response_seen_ && head.rfind("HTTP/1.", 0) == 0 && head.substr(8, 5) != " 100 ") {
      response_seen_ = true;
      const std::string headers(head.substr(0, head.find("\r\n\r\n") + 2));
      const std::string_view status = head.substr(9, 3);
      close_after_ = headers.find("\r\nConnection: close\r\n") != std::string::npos ||
                     status == "411" || status == "413" || status == "414" || status == "431";
    }
    if (!is_writable()) return -1;
    for (;;) {
      ssize_t n = ::send(conn_.fd, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(conn_.fd, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(conn_.fd, false, ip, port);
  }
  socket_t socket() const override { return conn_.fd; }

 private:
  GateConnection& conn_;
  size_t consumed_ = 0;
  bool response_seen_ = false;
  bool close_after_ = false;
  time_t read_sec_, read_usec_, write_sec_, write_usec_;
};

constexpr char kHeadersTooLarge[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
    "Content-Length: 96\r\nConnection: close\r\n\r\n"
    "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"request line and headers too large\"}}"
    "          ";  // pads the body to its Content-Length

}  // namespace

// The thread that owns every connection between requests (see the header).
class GatedServer::Gate {
 public:
  Gate(const GateOptions& options, std::function<void(GateConnection)> dispatch)
      : options_(options), dispatch_(std::move(dispatch)), wake_(::eventfd(0, EFD_CLOEXEC)) {
    thread_ = std::thread([this] { Run(); });
  }

  ~Gate() {
    Stop();
    ::close(wake_);
  }

  // A new connection (fresh = just accepted) or one a worker has served a request on. Closes it
  // when the gate has stopped or, for a new one, when too many are open.
  void Add(GateConnection conn, bool fresh) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_ || (fresh && open_ >= options_.max_connections)) {
        ::close(conn.fd);
        if (!fresh) --open_;
        return;
      }
      if (fresh) ++open_;
      conn.request_started = !conn.pending.empty();
      conn.deadline_ms =
          NowMs() + (conn.request_started ? options_.header_timeout_ms
                                          : options_.keep_alive_timeout_ms);
      inbox_.push_back(std::move(conn));
    }
    Wake();
  }

  // A connection a worker has closed.
  void Closed() {
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
  }

  size_t Open() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    Wake();
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (GateConnection& c : inbox_) ::close(c.fd);
    for (GateConnection& c : waiting_) ::close(c.fd);
    open_ -= inbox_.size() + waiting_.size();
    inbox_.clear();
    waiting_.clear();
  }

 private:
  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  void Close(GateConnection& c) {
    ::close(c.fd);
    c.fd = -1;
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
  }

  // Reads what `c` has sent; true when its headers are complete (hand it to a worker), false
  // to keep waiting. Closes `c` (fd -1) on end of stream, error or oversize headers.
  bool ReadHeaders(GateConnection& c) {
    char buf[4096];
    ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {
      Close(c);
      return false;
    }
    const size_t from = c.pending.size() < 3 ? 0 : c.pending.size() - 3;
    c.pending.append(buf, static_cast<size_t>(n));
    if (!c.request_started) {
      c.request_started = true;
      c.deadline_ms = NowMs() + options_.header_timeout_ms;
    }
    if (HeaderEnd(c.pending, from) != std::string::npos) return true;
    if (c.pending.size() > options_.max_header_bytes) {
      (void)!::send(c.fd, kHeadersTooLarge, sizeof kHeadersTooLarge - 1,
                    MSG_NOSIGNAL | MSG_DONTWAIT);
      Close(c);
    }
    return false;
  }

  void Run() {
    std::vector<pollfd> fds;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return;
        for (GateConnection& c : inbox_) waiting_.push_back(std::move(c));
        inbox_.clear();
      }
      // A served connection may hold the whole next request already (pipelining).
      for (GateConnection& c : waiting_) {
        if (c.request_started && HeaderEnd(c.pending, 0) != std::string::npos) {
          dispatch_(std::move(c));
          c.fd = -1;
        }
      }
      std::erase_if(waiting_, [](const GateConnection& c) { return c.fd < 0; });

      const int64_t now = NowMs();
      int64_t next = now + 60'000;
      fds.assign(1, pollfd{wake_, POLLIN, 0});
      for (GateConnection& c : waiting_) {
        fds.push_back(pollfd{c.fd, POLLIN, 0});
        next = std::min(next, c.deadline_ms);
      }
      int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, next - now)));
      if (n < 0 && errno != EINTR) return;
      if (fds[0].revents & POLLIN) {
        uint64_t count;
        (void)!::read(wake_, &count, sizeof count);
      }
      for (size_t i = 0; i < waiting_.size(); ++i) {
        GateConnection& c = waiting_[i];
        if (fds[i + 1].revents != 0 && ReadHeaders(c)) {
          dispatch_(std::move(c));
          c.fd = -1;
        }
      }
      // Too slow: an idle connection past its keep-alive time, or headers not done in time.
      const int64_t after = NowMs();
      for (GateConnection& c : waiting_) {
        if (c.fd >= 0 && c.deadline_ms <= after) Close(c);
      }
      std::erase_if(waiting_, [](const GateConnection& c) { return c.fd < 0; });
    }
  }

  const GateOptions options_;
  const std::function<void(GateConnection)> dispatch_;
  const int wake_;
  mutable std::mutex mu_;
  bool stopped_ = false;
  size_t open_ = 0;
  std::vector<GateConnection> inbox_;    // added, not yet seen by the gate thread
  std::vector<GateConnection> waiting_;  // the gate thread's own
  std::thread thread_;
};

GatedServer::GatedServer(GateOptions options) : options_(options) {
  workers_ = std::make_unique<httplib::ThreadPool>(options_.workers);
  gate_ = std::make_unique<Gate>(options_, [this](GateConnection c) {
    // The connection is moved into the task; std::function needs a copyable callable.
    auto shared = std::make_shared<GateConnection>(std::move(c));
    workers_->enqueue([this, shared] { Serve(std::move(*shared)); });
  });
  // httplib's own pool only hands accepted sockets to the gate.
  new_task_queue = [] { return new httplib::ThreadPool(2); };
}

GatedServer::~GatedServer() { StopGate(); }

void GatedServer::StopGate() {
  if (gate_stopped_.exchange(true)) return;
  gate_->Stop();
  workers_->shutdown();
}

bool GatedServer::SetListenBacklog(int backlog) {
  // listen() again on a listening socket changes only its backlog (capped by somaxconn).
  return svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, backlog) == 0;
}

size_t GatedServer::OpenConnections() const { return gate_->Open(); }

bool GatedServer::process_and_close_socket(socket_t sock) {
  GateConnection conn;
  conn.fd = sock;
  gate_->Add(std::move(conn), /*fresh=*/true);
  return true;
}

void GatedServer::Serve(GateConnection conn) {
  bool connection_closed = false;
  bool ok;
  {
    ConnectionStream stream(conn, read_timeout_sec_, read_timeout_usec_, write_timeout_sec_,
                            write_timeout_usec_);
    ok = process_request(stream, /*close_connection=*/gate_stopped_.load(), connection_closed,
                         nullptr);
    ok = ok && !stream.close_after();
  }
  if (!ok || connection_closed || gate_stopped_.load()) {
    ::close(conn.fd);
    gate_->Closed();
    return;
  }
  gate_->Add(std::move(conn), /*fresh=*/false);
}

}  // namespace controlplane::http
