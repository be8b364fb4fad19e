#include "common/http/gated_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/http/gate_connection.h"
#include "common/http/status_http.h"

namespace common::http {

namespace {

constexpr int kLingerMs = 1000;
constexpr size_t kLingerMaxBytes = 4 * 1024 * 1024;
constexpr size_t kReadChunk = 64 * 1024;

// The connection the worker on this thread serves, for ClientGone().
thread_local GateConnection* current_client = nullptr;

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

// A complete response with our JSON error body, for the answers the gate gives itself.
std::string Canned(int status, const char* reason, Code code, const std::string& message) {
  const std::string body = ErrorBodyText(Status(code, message));
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
}

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
    if (fresh) {
      int port = 0;
      SocketAddress(conn.fd, true, conn.address, port);
      {
        std::lock_guard<std::mutex> lock(mu_);
        size_t& from_address = per_address_[conn.address];
        if (stopped_ || open_ >= options_.max_connections ||
            (options_.max_connections_per_address > 0 &&
             from_address >= options_.max_connections_per_address)) {
          ::close(conn.fd);
          if (from_address == 0) per_address_.erase(conn.address);
          return;
        }
        ++open_;
        ++from_address;
      }
      // The handshake is the gate's, like a request's headers, and as bounded: a client that
      // never finishes one holds no worker and is closed at the header deadline.
      if (options_.tls) {
        conn.tls = options_.tls->Accept(conn.fd);
        conn.handshaking = true;
        if (!conn.tls) {
          CloseSocket(conn);
          Closed(conn);
          return;
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) {
        CloseSocket(conn);
        ForgetLocked(conn.address);
        return;
      }
      conn.recheck = true;
      conn.header_scanned = 0;
      if (!conn.lingering) {
        conn.request_started = !conn.pending.empty();
        conn.deadline_ms =
            NowMs() + (conn.request_started || conn.handshaking ? options_.header_timeout_ms
                                                                : options_.keep_alive_timeout_ms);
      }
      inbox_.push_back(std::move(conn));
    }
    Wake();
  }

  // A connection a worker has served a refused request on: linger, then close.
  void Linger(GateConnection conn) {
    StartLinger(conn);
    Add(std::move(conn), /*fresh=*/false);
  }

  // A connection a worker has closed.
  void Closed(const GateConnection& conn) {
    std::lock_guard<std::mutex> lock(mu_);
    ForgetLocked(conn.address);
  }

  void StreamDone() {
    std::lock_guard<std::mutex> lock(mu_);
    --streams_;
  }

  size_t Open() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }

  size_t Streams() const {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
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
    for (GateConnection& c : inbox_) CloseSocket(c);
    for (GateConnection& c : waiting_) CloseSocket(c);
    open_ -= inbox_.size() + waiting_.size();
    inbox_.clear();
    waiting_.clear();
  }

 private:
  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  void ForgetLocked(const std::string& address) {
    --open_;
    auto it = per_address_.find(address);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }

  void Close(GateConnection& c) {
    CloseSocket(c);
    budget_used_ -= c.body_reserved;
    c.body_reserved = 0;
    std::lock_guard<std::mutex> lock(mu_);
    ForgetLocked(c.address);
  }

  static void StartLinger(GateConnection& c) {
    ShutWrite(c);
    c.lingering = true;
    c.deadline_ms = NowMs() + kLingerMs;
    c.pending.clear();
  }

  // Answers `c` on the spot and lingers.
  void Refuse(GateConnection& c, const std::string& response) {
    SendNow(c, response);
    budget_used_ -= c.body_reserved;
    c.body_reserved = 0;
    StartLinger(c);
  }

  // Reads what `c` has sent (up to kReadChunk), moving its TLS handshake on first. Closes `c`
  // (fd -1) on end of stream or error.
  void Read(GateConnection& c) {
    char buf[kReadChunk];
    if (c.lingering) {
      // Dropped as it comes, TLS records unopened: only the client's close is awaited.
      ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (n <= 0) return Close(c);
      c.discarded += static_cast<size_t>(n);
      if (c.discarded > kLingerMaxBytes) Close(c);
      return;
    }
    if (c.handshaking) {
      const ssize_t done = c.tls.Handshake();
      if (done == TlsSession::kWait) return;
      if (done == 0) return Close(c);  // not TLS (a plaintext request included), or refused
      c.handshaking = false;
      // Idle until the first request begins, as a plaintext connection is from its accept.
      c.deadline_ms = NowMs() + options_.keep_alive_timeout_ms;
    }
    // A TLS read yields one record (16 KiB at most): what the socket holds is read in one go
    // rather than one record per round of poll().
    size_t got = 0;
    for (;;) {
      const ssize_t n = ReadNow(c, buf + got, sizeof buf - got);
      if (n == TlsSession::kWait) break;
      if (n <= 0) {
        if (got == 0) return Close(c);
        break;  // what came before the end is still a request; the end is seen next round
      }
      got += static_cast<size_t>(n);
      if (!c.tls || got == sizeof buf) break;
    }
    if (got == 0) return;
    c.pending.append(buf, got);
    if (!c.request_started) {
      c.request_started = true;
      c.deadline_ms = NowMs() + options_.header_timeout_ms;
    }
  }

  // Moves `c` on as far as what it has sent allows; true when it was handed to a worker.
  bool Advance(GateConnection& c) {
    if (c.lingering || !c.request_started) return false;
    if (c.request_bytes == 0) {
      // Only what arrived since the last look is searched (less the 3 bytes a terminator
      // split across reads may have begun with): a slow client's headers cost linear time.
      const size_t end = HeaderEnd(c.pending, c.header_scanned < 3 ? 0 : c.header_scanned - 3);
      c.header_scanned = c.pending.size();
      if (end == std::string::npos) {
        if (c.pending.size() > options_.max_header_bytes) {
          Refuse(c, Canned(431, "Request Header Fields Too Large", Code::kInvalidArgument,
                           "request line and headers too large"));
        }
        return false;
      }
      const RequestHead head = ParseRequestHead(std::string_view(c.pending).substr(0, end));
      if (!head.error.empty()) {
        Refuse(c, Canned(400, "Bad Request", Code::kInvalidArgument, head.error));
        return false;
      }
      c.stream = options_.is_stream && options_.is_stream(head);
      // The body is read here only when the edge policy will let a worker read it; otherwise
      // the worker answers at once without reading (or there is no body).
      uint64_t body = head.content_length.value_or(0);
      if (RefuseBody(head.has_transfer_encoding, head.has_content_encoding, head.content_length,
                     head.has_bearer, options_.limits)) {
        body = 0;
      }
      c.request_bytes = end + body;
      if (body > 0) {
        c.deadline_ms =
            NowMs() + options_.body_timeout_ms +
            static_cast<int64_t>(body * 1000 / std::max<size_t>(1, options_.min_body_bytes_per_s));
      }
    }
    if (c.pending.size() < c.request_bytes) {
      if (c.body_reserved == 0) {
        const size_t need = c.request_bytes - std::min(c.request_bytes, c.pending.size());
        if (budget_used_ == 0 || budget_used_ + need <= options_.body_budget) {
          c.body_reserved = need;
          budget_used_ += need;
        }
      }
      return false;
    }
    budget_used_ -= c.body_reserved;
    c.body_reserved = 0;
    c.request_bytes = 0;
    c.header_scanned = 0;
    if (c.stream) {
      bool full;
      {
        std::lock_guard<std::mutex> lock(mu_);
        full = streams_ >= options_.stream_workers;
        if (!full) ++streams_;
      }
      if (full) {
        Refuse(c, Canned(503, "Service Unavailable", Code::kUnavailable,
                         "too many streams open on this server; retry later"));
        return false;
      }
    }
    dispatch_(std::move(c));
    c.fd = -1;
    return true;
  }

  // Whether the gate reads from `c` now: a body waiting for its share of the budget is not read
  // (its bytes stay in the kernel, its deadline runs).
  static bool Polled(const GateConnection& c) {
    return c.lingering || c.request_bytes == 0 || c.body_reserved > 0;
  }

  void Run() {
    std::vector<pollfd> fds;
    std::vector<size_t> polled;  // index in waiting_ of fds[i + 1]
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return;
        for (GateConnection& c : inbox_) waiting_.push_back(std::move(c));
        inbox_.clear();
      }
      // A connection new to the gate may hold a whole request already (pipelining), and a body
      // waiting for its share of the budget may get it now; the others move only on new bytes.
      for (GateConnection& c : waiting_) {
        if (c.recheck || (c.request_bytes > 0 && c.body_reserved == 0)) {
          c.recheck = false;
          Advance(c);
        }
      }
      std::erase_if(waiting_, [](const GateConnection& c) { return c.fd < 0; });

      const int64_t now = NowMs();
      int64_t next = now + 60'000;
      fds.assign(1, pollfd{wake_, POLLIN, 0});
      polled.clear();
      for (size_t i = 0; i < waiting_.size(); ++i) {
        next = std::min(next, waiting_[i].deadline_ms);
        if (!Polled(waiting_[i])) continue;
        fds.push_back(pollfd{waiting_[i].fd, GateEvents(waiting_[i]), 0});
        polled.push_back(i);
        // Bytes OpenSSL has already decrypted do not make the socket readable.
        if (ReadableNow(waiting_[i])) next = now;
      }
      int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, next - now)));
      if (n < 0 && errno != EINTR) return;
      if (fds[0].revents & POLLIN) {
        uint64_t count;
        (void)!::read(wake_, &count, sizeof count);
      }
      for (size_t k = 0; k < polled.size(); ++k) {
        GateConnection& c = waiting_[polled[k]];
        if (fds[k + 1].revents == 0 && !ReadableNow(c)) continue;
        Read(c);
        if (c.fd >= 0) Advance(c);
      }
      // Too slow: an idle connection past its keep-alive time, a request not complete in time,
      // a refused one done lingering.
      const int64_t after = NowMs();
      for (GateConnection& c : waiting_) {
        if (c.fd < 0 || c.deadline_ms > after) continue;
        if (c.request_started && !c.lingering) {
          const std::string timeout = Canned(408, "Request Timeout", Code::kInvalidArgument,
                                             "the request did not arrive in time");
          SendNow(c, timeout);
        }
        Close(c);
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
  size_t streams_ = 0;
  std::map<std::string, size_t> per_address_;
  std::vector<GateConnection> inbox_;    // added, not yet seen by the gate thread
  std::vector<GateConnection> waiting_;  // the gate thread's own
  size_t budget_used_ = 0;               // the gate thread's own
  std::thread thread_;
};

GatedServer::GatedServer(GateOptions options) : options_(std::move(options)) {
  workers_ = std::make_unique<httplib::ThreadPool>(options_.workers);
  if (options_.stream_workers > 0) {
    stream_workers_ = std::make_unique<httplib::ThreadPool>(options_.stream_workers);
  }
  gate_ = std::make_unique<Gate>(options_, [this](GateConnection c) {
    // The connection is moved into the task; std::function needs a copyable callable.
    auto shared = std::make_shared<GateConnection>(std::move(c));
    httplib::ThreadPool& pool = shared->stream ? *stream_workers_ : *workers_;
    pool.enqueue([this, shared] { Serve(std::move(*shared)); });
  });
  // httplib's own pool only hands accepted sockets to the gate.
  new_task_queue = [] { return new httplib::ThreadPool(2); };
  InstallEdgePolicy(*this, options_.limits);
}

GatedServer::~GatedServer() { StopGate(); }

void GatedServer::StopGate() {
  if (gate_stopped_.exchange(true)) return;
  gate_->Stop();
  workers_->shutdown();
  if (stream_workers_) stream_workers_->shutdown();
}

bool GatedServer::SetListenBacklog(int backlog) {
  // listen() again on a listening socket changes only its backlog (capped by somaxconn).
  return svr_sock_ != INVALID_SOCKET && ::listen(svr_sock_, backlog) == 0;
}

size_t GatedServer::OpenConnections() const { return gate_->Open(); }

size_t GatedServer::ActiveStreams() const { return gate_->Streams(); }

bool GatedServer::ClientGone() {
  return current_client != nullptr && ClientClosed(*current_client);
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  GateConnection conn;
  conn.fd = sock;
  gate_->Add(std::move(conn), /*fresh=*/true);
  return true;
}

void GatedServer::Serve(GateConnection conn) {
  bool connection_closed = false;
  bool ok;
  bool close_after = false;
  {
    ConnectionStream stream(conn, read_timeout_sec_, read_timeout_usec_, write_timeout_sec_,
                            write_timeout_usec_);
    current_client = &conn;
    ok = process_request(stream, /*close_connection=*/gate_stopped_.load(), connection_closed,
                         nullptr);
    current_client = nullptr;
    close_after = stream.close_after();
  }
  if (conn.stream) gate_->StreamDone();
  conn.stream = false;
  if (ok && (close_after || connection_closed) && !gate_stopped_.load()) {
    // The answer is written; what the client may still be sending is dropped for a moment.
    gate_->Linger(std::move(conn));
    return;
  }
  if (!ok || gate_stopped_.load()) {
    CloseSocket(conn);
    gate_->Closed(conn);
    return;
  }
  gate_->Add(std::move(conn), /*fresh=*/false);
}

}  // namespace common::http
