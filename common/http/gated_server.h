// An httplib::Server whose worker threads only ever serve complete requests: the HTTP edge of
// every listener (embody-server's API, the agent's job-local API and rsh bridge).
//
// cpp-httplib gives every connection a pooled thread from accept to close, so a client that
// connects and sends nothing, sends its headers or its body a byte at a time, or opens a stream
// and leaves holds a worker for as long as it likes; a few dozen stop heartbeats and API calls.
// Here one gate thread owns every connection between requests, with poll(): it reads a request's
// headers and then its body, and hands the connection to a worker only once the whole request has
// arrived. So:
// - a request's headers must arrive within header_timeout of its first byte, and its body within
//   body_timeout plus its length at min_body_rate; too slow: 408, closed;
// - bodies the edge policy (edge_policy.h, installed by the constructor with options.limits)
//   refuses unread (too large, anonymous and over the anonymous bound, chunked, encoded) go to a
//   worker at once, which answers without reading; a request with no Content-Length has no
//   body;
// - the bodies being read at once hold at most body_budget bytes; the rest wait their turn;
// - an idle keep-alive connection is closed after keep_alive_timeout; open connections are capped
//   in all and per client address;
// - long-lived responses (a log follow, an rsh stream), chosen by `is_stream`, are served by a
//   pool of their own, bounded (503 beyond it), so they never take the workers ordinary requests
//   need; such a response ends when the client goes (ClientGone()).
// A refused request's connection is closed after a short lingering read, so that its client reads
// the answer rather than a reset.
//
// With options.tls the gate terminates TLS itself (server_tls.h): it drives each connection's
// handshake from its poll loop, within header_timeout of the accept (a client that connects and
// never finishes a handshake costs no worker and is closed then, as a slow header is), reads
// requests decrypted, and the worker serves the request through the same session. Every rule
// above holds for TLS as for plaintext; a client that speaks plaintext to a TLS listener fails
// its handshake and is closed unanswered.
//
// Not here: routes, what bodies a route accepts (edge_policy.h and the handlers).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include <httplib.h>

#include "common/http/edge_policy.h"
#include "common/http/request_head.h"

namespace common::http {

struct GateConnection;  // gate_connection.h
class ServerTls;        // server_tls.h

struct GateOptions {
  size_t workers = 32;                       // threads that serve requests
  int header_timeout_ms = 10'000;            // a request's first byte to the end of its headers
  int keep_alive_timeout_ms = 5'000;         // idle between requests (and before the first)
  size_t max_header_bytes = 32 * 1024;       // request line and headers; more: 431, closed
  size_t max_connections = 10'000;           // open at once; more are closed on accept
  size_t max_connections_per_address = 512;  // from one client address; 0: no cap
  // The bodies accepted: the gate reads them before a worker sees the request, and the edge
  // policy, which the server installs with them, refuses the others unread (edge_policy.h).
  BodyLimits limits;
  int body_timeout_ms = 10'000;              // end of headers to end of body, plus ...
  size_t min_body_bytes_per_s = 256 * 1024;  // ... the body's length at this rate
  size_t body_budget = 128 * 1024 * 1024;    // bytes of bodies being read at once, all clients
  // Long-lived responses: which requests are streams, and how many may be served at once.
  std::function<bool(const RequestHead&)> is_stream;
  size_t stream_workers = 0;
  // TLS on every connection (ServerTls::Load, which reports bad files); null: plaintext.
  std::shared_ptr<const ServerTls> tls;
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
  // Streams being served now.
  size_t ActiveStreams() const;

  // On a worker serving a request (a stream's content provider included): whether its client
  // has closed the connection or reset it. False anywhere else.
  static bool ClientGone();

 private:
  class Gate;
  // Called by httplib on one of its own threads for each accepted socket: hands it to the gate.
  bool process_and_close_socket(socket_t sock) override;
  // Serves one request from `conn` on a worker, then gives it back to the gate or closes it.
  void Serve(GateConnection conn);

  GateOptions options_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::unique_ptr<httplib::ThreadPool> stream_workers_;
  std::atomic<bool> gate_stopped_{false};
};

}  // namespace common::http
