// An httplib::Server whose worker threads only ever serve complete requests. cpp-httplib gives
// every connection a pooled thread from accept to close, so a client that connects and sends
// nothing, or sends its headers a byte at a time (slow loris), holds a worker for as long as it
// likes (each byte resets the 30 s read timeout); a few dozen of them stop heartbeats and API
// calls. Here one gate thread owns every connection between requests: it reads the request's
// headers with poll() and hands the connection to a worker only once the blank line that ends
// them has arrived. A request's headers must arrive within header_timeout of its first byte, an
// idle keep-alive connection is closed after keep_alive_timeout, and the number of open
// connections is capped.
//
// A worker then runs httplib's own request processing (routing, handlers, body reading with the
// server's read timeout) on a stream that serves the bytes the gate already read first, and
// gives the connection back to the gate afterwards. Bodies are not gated: every route that takes
// one needs a bearer token, and the API server refuses a large body without one unread.
//
// Not here: routes, limits on bodies (api_server.cc).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <httplib.h>

namespace controlplane::http {

struct GateConnection;  // gated_server.cc

struct GateOptions {
  size_t workers = 32;                // threads that serve requests
  int header_timeout_ms = 10'000;     // a request's first byte to the end of its headers
  int keep_alive_timeout_ms = 5'000;  // idle between requests (and before the first)
  size_t max_header_bytes = 32 * 1024;  // request line and headers; more: 431, closed
  size_t max_connections = 10'000;      // open at once; more are closed on accept
};

class GatedServer : public httplib::Server {
 public:
  explicit GatedServer(GateOptions options);
  ~GatedServer() override;

  // httplib listens with a backlog of 5, so a burst of connections (agents after a restart)
  // waits for SYN retransmits, a second or more each; call after binding.
  bool SetListenBacklog(int backlog);

  // Closes the connections waiting at the gate and waits for the requests being served. Call
  // after stop(), which ends the accept loop; idempotent.
  void StopGate();

  // Connections open now (waiting at the gate or being served).
  size_t OpenConnections() const;

 private:
  class Gate;
  // Called by httplib on one of its own threads for each accepted socket: hands it to the gate.
  bool process_and_close_socket(socket_t sock) override;
  // Serves one request from `conn` on a worker, then gives it back to the gate or closes it.
  void Serve(GateConnection conn);

  GateOptions options_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::atomic<bool> gate_stopped_{false};
};

}  // namespace controlplane::http
