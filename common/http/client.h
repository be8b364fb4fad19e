// How an Embody process makes HTTP calls: the CLI to embody-server, an agent to embody-server, a
// job's engine to its agent. Blob transfers (checkpoints, dataset uploads) go through BlobClient
// (blob_client.h) on top of Client. One call still drives httplib::Client itself and shares only
// VerifyServer below: the rsh bridge's exec stream (agent/rsh/rsh_client.cc), a bidirectional stream
// Client has no shape for.
//
// A Client is made from a base URL and carries what every call needs: connect/read/write
// timeouts, TCP_NODELAY (httplib writes headers and body apart; without it Nagle's algorithm and
// the peer's delayed ACK hold each call ~40 ms), keep-alive, the bearer token, and an
// X-Request-Id on every request (the caller's, or a fresh one) so one call can be found in the
// logs of both ends.
//
// An https:// client verifies the server (VerifyServer below): its chain against the CA file
// given (or the system's CAs), its name against the URL's host. There is no way to turn that off.
//
// Failures come back as Status: no answer at all is unavailable; an answer that is not 2xx is
// decoded by StatusFromResponse (status_http.h) when asked for with Call/Stream, so a client
// sees the server's code, message and field.
//
// A Client serves one call at a time (calls from several threads wait their turn). It is not the
// place for retries: what to retry is the caller's decision.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace common::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct ClientOptions {
  // "http://host:port" or "https://host:port", optionally followed by a path prefix that is put
  // before every request's path ("http://127.0.0.1:7070/agent").
  std::string base_url;
  double connect_timeout_s = 5;
  double read_timeout_s = 60;
  double write_timeout_s = 60;
  std::string bearer_token;  // empty: no Authorization header
  // https: the PEM file of the CAs the server's certificate must chain to; empty: the system's.
  std::string ca_file;
  // When set, read at every call and sent instead of bearer_token (a credential that may be
  // replaced while the client lives: an agent's node credential).
  std::function<std::string()> bearer_token_source;
};

struct Request {
  std::string method = "GET";  // GET, POST, PUT, PATCH or DELETE
  std::string path;            // from the root of the base URL's prefix, query included
  std::string body;
  std::string content_type = "application/json";
  HeaderList headers;
  // Sent as X-Request-Id; empty, or not safe to log (common/request_id.h): a fresh id.
  std::string request_id;
};

struct Response {
  int status = 0;
  std::string body;
  HeaderList headers;
  std::string request_id;  // the X-Request-Id the request carried
  // The first value of header `name` (case-insensitive); empty when absent.
  std::string Header(const std::string& name) const;
  bool ok() const { return status >= 200 && status <= 299; }
};

class Client {
 public:
  // invalid_argument when `base_url` is not an http(s) URL with a host, or `ca_file` holds no
  // certificate that can be read.
  static Result<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The token sent from the next call on (an agent's credential changes when it registers).
  void SetBearerToken(const std::string& token);

  // One round trip. Any HTTP status is a Response; only a call that got no answer (refused,
  // timed out, reset) is a Status: unavailable, naming the URL and the request id.
  Result<Response> Send(const Request& request);
  // Send, and a non-2xx answer becomes its decoded Status.
  Result<Response> Call(const Request& request);
  // GET `path`, handing a 2xx body to `sink` piece by piece as it arrives (log follow); a non-2xx
  // answer becomes its decoded Status. `read_timeout_s` replaces the client's for this call.
  Status Stream(const std::string& path, const std::function<void(const char*, size_t)>& sink,
                double read_timeout_s, const std::string& request_id = "");
  // GET `request` (its headers sent: a Range), handing a 2xx body to `sink` piece by piece; an
  // error from `sink` stops the call and is returned. The Response carries the status and
  // headers, and the body only when not 2xx (bounded). A call that got no answer, or whose 2xx
  // body broke off, is unavailable: what `sink` took so far stays taken. A 200 to a request with
  // a Range past byte 0 (the server ignored it) comes back as a bare 200, nothing handed on.
  Result<Response> Receive(const Request& request,
                           const std::function<Status(const char*, size_t)>& sink);

  // Aborts the call in flight on another thread (it fails as unavailable); no effect when none
  // is. For a caller that stops waiting on a held call (a held agent heartbeat).
  void Interrupt();

  const ClientOptions& options() const { return options_; }

 private:
  Client(ClientOptions options, std::string prefix, std::unique_ptr<httplib::Client> http);
  Status Unreachable(int error, const std::string& request_id) const;
  Result<Response> Get(const Request& request,
                       const std::function<Status(const char*, size_t)>& sink,
                       double read_timeout_s);

  const ClientOptions options_;
  const std::string prefix_;
  std::mutex mu_;
  std::unique_ptr<httplib::Client> http_;
};

// For an https `url`, makes `http` (built from that URL) verify the server: its certificate must
// chain to a CA of `ca_file` (empty: the system's CAs) and name the URL's host in its
// subjectAltName (a DNS name, or the IP address for a URL with one; the subject's common name is
// not looked at, so a certificate for another host never passes); TLS 1.2 or later. Nothing for
// http. invalid_argument when `ca_file` holds no certificate that can be read. For the few callers
// that need httplib::Client itself (streams with their own receivers); the others use Client.
Status VerifyServer(httplib::Client& http, const std::string& url, const std::string& ca_file);

// invalid_argument, naming `ca_file` and why, unless it holds a PEM certificate OpenSSL reads.
Status CheckCaFile(const std::string& ca_file);

// "http://h:1/p/" -> {"http://h:1", "/p"}: what httplib connects to and the prefix of every path.
// invalid_argument when the scheme is not http or https or there is no host.
Result<std::pair<std::string, std::string>> SplitBaseUrl(const std::string& url);

}  // namespace common::http
