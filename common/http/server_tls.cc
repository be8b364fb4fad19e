#include "common/http/server_tls.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace common::http {

namespace {

int SocketOf(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

// The socket BIO OpenSSL would make, but non-blocking and without SIGPIPE on every call, so the
// same session works on the gate's thread and, with waits of its own, on a worker's.
int BioWrite(BIO* b, const char* data, int size) {
  BIO_clear_retry_flags(b);
  for (;;) {
    ssize_t n = ::send(SocketOf(b), data, static_cast<size_t>(size), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
    return static_cast<int>(n);
  }
}

int BioRead(BIO* b, char* out, int size) {
  BIO_clear_retry_flags(b);
  for (;;) {
    ssize_t n = ::recv(SocketOf(b), out, static_cast<size_t>(size), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
    return static_cast<int>(n);
  }
}

long BioCtrl(BIO*, int cmd, long, void*) {
  // Writes go straight to the socket: there is nothing to flush. Nothing else is supported.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int BioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

int BioDestroy(BIO*) { return 1; }  // the socket is the connection's, closed by its owner

const BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "gate socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    BIO_meth_set_destroy(m, BioDestroy);
    return m;
  }();
  return method;
}

// An encrypted key would otherwise make OpenSSL prompt for its passphrase on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

}  // namespace

std::string OpenSslErrors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::TlsSession(TlsSession&& other) noexcept
    : ssl_(std::exchange(other.ssl_, nullptr)), want_(other.want_), failed_(other.failed_) {}

TlsSession& TlsSession::operator=(TlsSession&& other) noexcept {
  if (this != &other) {
    SSL_free(ssl_);
    ssl_ = std::exchange(other.ssl_, nullptr);
    want_ = other.want_;
    failed_ = other.failed_;
  }
  return *this;
}

ssize_t TlsSession::Outcome(int rc) {
  switch (SSL_get_error(ssl_, rc)) {
    case SSL_ERROR_WANT_READ:
      want_ = POLLIN;
      return kWait;
    case SSL_ERROR_WANT_WRITE:
      want_ = POLLOUT;
      return kWait;
    case SSL_ERROR_ZERO_RETURN:  // close_notify: the client is done, the session is sound
      return 0;
    default:
      // A broken session must not be shut down (SSL_shutdown after a fatal error is undefined).
      failed_ = true;
      ERR_clear_error();
      return 0;
  }
}

ssize_t TlsSession::Handshake() {
  if (failed_) return 0;
  ERR_clear_error();
  const int rc = SSL_accept(ssl_);
  return rc == 1 ? 1 : Outcome(rc);
}

bool TlsSession::Handshaken() const { return ssl_ != nullptr && SSL_is_init_finished(ssl_); }

ssize_t TlsSession::Read(char* buf, size_t size) {
  if (failed_) return 0;
  ERR_clear_error();
  size_t got = 0;
  if (SSL_read_ex(ssl_, buf, size, &got) == 1) return static_cast<ssize_t>(got);
  return Outcome(0);
}

ssize_t TlsSession::Write(const char* data, size_t size) {
  if (failed_) return 0;
  ERR_clear_error();
  size_t written = 0;
  if (SSL_write_ex(ssl_, data, size, &written) == 1) return static_cast<ssize_t>(written);
  return Outcome(0);
}

bool TlsSession::Buffered() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }

bool TlsSession::PeerClosed() {
  if (failed_) return true;
  ERR_clear_error();
  char byte;
  size_t got = 0;
  if (SSL_peek_ex(ssl_, &byte, 1, &got) == 1) return false;
  return Outcome(0) != kWait;
}

void TlsSession::Shutdown() {
  if (ssl_ == nullptr || failed_ || !SSL_is_init_finished(ssl_) ||
      (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) != 0) {
    return;
  }
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);  // the alert goes out if the socket takes it now; else never mind
  ERR_clear_error();
}

Result<std::shared_ptr<const ServerTls>> ServerTls::Load(const TlsFiles& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return InvalidArgument("TLS needs both a certificate chain file and a key file",
                           files.cert_file.empty() ? "tls-cert" : "tls-key");
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal(OpenSslErrors("cannot make a TLS context"));
  std::shared_ptr<const ServerTls> tls(new ServerTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // Partial writes: httplib's writer goes on from where a write stopped. Released buffers: an
  // idle connection holds a few hundred bytes of TLS state, not two 16 KiB record buffers.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassphrase);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return InvalidArgument("cannot load the TLS certificate chain " + files.cert_file + ": " +
                               OpenSslErrors("not a PEM certificate"),
                           "tls-cert");
  }
  EVP_PKEY* key = nullptr;
  if (BIO* in = BIO_new_file(files.key_file.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(in, nullptr, NoPassphrase, nullptr);
    BIO_free(in);
  }
  if (key == nullptr) {
    return InvalidArgument("cannot load the TLS private key " + files.key_file +
                               " (PEM, not "
                               "encrypted): " +
                               OpenSslErrors("not a PEM private key"),
                           "tls-key");
  }
  const bool used = SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!used || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return InvalidArgument("the TLS private key " + files.key_file +
                               " is not the key of the certificate in " + files.cert_file,
                           "tls-key");
  }
  ERR_clear_error();
  return tls;
}

ServerTls::~ServerTls() { SSL_CTX_free(ctx_); }

bool ServerTls::Names(const std::string& host) const {
  X509* cert = SSL_CTX_get0_certificate(ctx_);
  if (cert == nullptr) return false;
  unsigned char ip[16];
  const bool is_ip =
      ::inet_pton(AF_INET, host.c_str(), ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), ip) == 1;
  const int named = is_ip ? X509_check_ip_asc(cert, host.c_str(), 0)
                          : X509_check_host(cert, host.c_str(), host.size(),
                                            X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                                                X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
                                            nullptr);
  ERR_clear_error();
  return named == 1;
}

TlsSession ServerTls::Accept(int fd) const {
  const BIO_METHOD* method = SocketMethod();
  if (method == nullptr) return TlsSession();
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return TlsSession();
  BIO* bio = BIO_new(method);
  if (bio == nullptr) {
    SSL_free(ssl);
    return TlsSession();
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // the session owns the BIO, not the socket
  SSL_set_accept_state(ssl);
  return TlsSession(ssl);
}

}  // namespace common::http
