// TLS as the gate (gated_server.h) terminates it: the server's context, loaded once from its
// certificate chain and key, and one accepted connection's session.
//
// The gate reads a request before any worker sees it, so it cannot hand sockets to OpenSSL's
// blocking calls (httplib::SSLServer does): every session call here is non-blocking and says,
// when it cannot go on, whether it waits for the socket to be readable or writable (want()), so
// that the gate's poll loop drives handshakes and reads exactly as it drives plaintext. The
// socket I/O underneath uses MSG_DONTWAIT and MSG_NOSIGNAL whatever the socket's flags: a peer
// that resets mid-write costs an error, never SIGPIPE.
//
// Sessions use TLS 1.2 or later, refuse renegotiation (a client could make the server redo the
// costly half of a handshake at will) and keep no session cache or tickets (our clients do not
// resume, and a cache is memory every hostile handshake could fill).
//
// A session is used by one thread at a time (the gate, then the worker serving a request, then
// the gate again); ServerTls may be shared by any number of threads.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace common::http {

struct TlsFiles {
  std::string cert_file;  // PEM: the server's certificate, then any intermediates
  std::string key_file;   // PEM: its private key, not encrypted
};

// One connection's TLS, server side. Empty (false) for a plaintext connection.
class TlsSession {
 public:
  // Returned instead of a byte count by a call that must wait for want().
  static constexpr ssize_t kWait = -1;

  TlsSession() = default;
  ~TlsSession();
  TlsSession(TlsSession&& other) noexcept;
  TlsSession& operator=(TlsSession&& other) noexcept;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  explicit operator bool() const { return ssl_ != nullptr; }

  // The server's half of the handshake, as far as the socket allows: 1 done, kWait, or 0 failed
  // (not TLS, a version or cipher we refuse, the client gave up).
  ssize_t Handshake();
  bool Handshaken() const;
  // Up to `size` decrypted bytes: > 0 bytes, kWait, or 0 when the client closed or the session
  // failed.
  ssize_t Read(char* buf, size_t size);
  // Writes up to `size` bytes: > 0 bytes written, kWait, or 0 when the session failed.
  ssize_t Write(const char* data, size_t size);
  // Poll events (POLLIN or POLLOUT) the last call that returned kWait waits for.
  short want() const { return want_; }
  // Decrypted bytes held inside OpenSSL: they do not make the socket readable.
  bool Buffered() const;
  // Whether the client has closed its side (close_notify, end of stream, a broken session);
  // reads nothing it would not also give Read later.
  bool PeerClosed();
  // Best effort, once, never blocking: tells the client no more data follows (close_notify).
  void Shutdown();

 private:
  friend class ServerTls;
  explicit TlsSession(SSL* ssl) : ssl_(ssl) {}
  // What a call that returned `rc` <= 0 means: kWait (want_ set) or 0 (failed_ set when the
  // session is broken, not merely closed by the client).
  ssize_t Outcome(int rc);

  SSL* ssl_ = nullptr;
  short want_ = 0;
  bool failed_ = false;
};

class ServerTls {
 public:
  // invalid_argument naming the file and OpenSSL's reason when the chain or key cannot be read,
  // or the key is not the certificate's.
  static Result<std::shared_ptr<const ServerTls>> Load(const TlsFiles& files);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // A session for accepted socket `fd` (which it neither owns nor closes), not yet handshaken;
  // empty when OpenSSL cannot make one.
  TlsSession Accept(int fd) const;

  // Whether the certificate names `host`, a DNS name or an IP address, in its subjectAltName: as
  // our clients check it (client.h), so whether they will accept it for that host.
  bool Names(const std::string& host) const;

 private:
  explicit ServerTls(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* const ctx_;
};

// OpenSSL's queued errors of this thread as one line (and the queue emptied); `fallback` when
// there are none.
std::string OpenSslErrors(const std::string& fallback);

}  // namespace common::http
