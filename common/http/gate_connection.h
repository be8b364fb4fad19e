// One client connection of a GatedServer (gated_server.h) as its gate and its workers see it,
// and the I/O both do on it, the same calls for plaintext and TLS (server_tls.h): the gate's
// non-blocking reads and canned answers, the worker's httplib::Stream, the close.
//
// Not here: what the gate decides (deadlines, caps, budgets), which is gated_server.cc's.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <httplib.h>

#include "common/http/server_tls.h"

namespace common::http {

// One client connection between accept and close.
struct GateConnection {
  int fd = -1;
  TlsSession tls;            // empty: plaintext
  bool handshaking = false;  // TLS: the handshake has not finished
  std::string address;       // the client's, for the per-address cap
  std::string pending;       // read by the gate (decrypted, for TLS), not yet consumed by a request
  int64_t deadline_ms = 0;
  bool request_started = false;  // some of the next request's bytes have arrived
  size_t header_scanned = 0;     // bytes of `pending` already searched for the headers' end
  bool recheck = true;           // new to the gate: its pending bytes may hold a whole request
  // Once the head is complete: its length plus that of the body the gate reads; 0 before.
  size_t request_bytes = 0;
  size_t body_reserved = 0;  // of the gate's body budget
  bool stream = false;       // served by the stream pool
  // Refused: the answer is sent, the write side shut, and what the client still sends is read
  // and dropped until the deadline, so that its client reads the answer rather than a reset.
  bool lingering = false;
  size_t discarded = 0;
};

// The poll events that let the gate move `c` on: a TLS session may need to write to read.
short GateEvents(const GateConnection& c);
// Whether bytes can be read from `c` without waiting for the socket (decrypted, inside OpenSSL).
bool ReadableNow(const GateConnection& c);
// Non-blocking: up to `size` of the bytes the client sent (decrypted): > 0, TlsSession::kWait
// when none are there yet, 0 when the client closed or the connection failed.
ssize_t ReadNow(GateConnection& c, char* buf, size_t size);
// Non-blocking, best effort: a short answer the gate gives itself.
void SendNow(GateConnection& c, std::string_view data);
// Nothing more will be sent: close_notify (TLS, best effort), then the socket's write side.
void ShutWrite(GateConnection& c);
// Closes the socket (after a best-effort close_notify) and frees the TLS session; fd becomes -1.
void CloseSocket(GateConnection& c);
// Whether the client has closed or reset the connection; never blocks.
bool ClientClosed(GateConnection& c);

// Waits up to sec/usec for `events` (or a hang-up, or an error) on `fd`.
bool WaitFor(int fd, short events, time_t sec, time_t usec);

// httplib's view of a connection while a worker serves one request: the bytes the gate read
// come first, then the socket (through the TLS session, if any), each wait bounded by the
// server's read and write timeouts.
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

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;

  // The response asked the client to close, or refused the request before reading its body,
  // whose bytes would otherwise be read as the next request.
  bool close_after() const { return close_after_; }

  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return conn_.fd; }

 private:
  GateConnection& conn_;
  size_t consumed_ = 0;
  bool response_seen_ = false;
  bool close_after_ = false;
  time_t read_sec_, read_usec_, write_sec_, write_usec_;
};

// The address of `fd`'s peer (`peer`) or its own; unchanged when the socket has none.
void SocketAddress(int fd, bool peer, std::string& ip, int& port);

}  // namespace common::http
