#include "common/http/client.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <strings.h>

#include <algorithm>

#include "common/http/server_tls.h"
#include "common/http/status_http.h"
#include "common/request_id.h"

namespace common::http {

namespace {

void SetTimeout(double seconds, const std::function<void(time_t, time_t)>& set) {
  const auto usec = static_cast<int64_t>(seconds * 1e6);
  set(static_cast<time_t>(usec / 1000000), static_cast<time_t>(usec % 1000000));
}

HeaderList ToList(const httplib::Headers& headers) {
  return HeaderList(headers.begin(), headers.end());
}

// The headers every call carries: the caller's, the request id `id`, the token from the source.
httplib::Headers HeadersFor(const ClientOptions& options, const Request& request,
                            const std::string& id) {
  httplib::Headers headers(request.headers.begin(), request.headers.end());
  headers.emplace(kRequestIdHeader, id);
  if (options.bearer_token_source) {
    headers.emplace("Authorization", "Bearer " + options.bearer_token_source());
  }
  return headers;
}

// "https://host:port/p" -> "host"; "https://[::1]:port" -> "::1".
std::string HostOf(const std::string& url) {
  const size_t start = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  std::string authority = url.substr(start, url.find('/', start) - start);
  if (!authority.empty() && authority.front() == '[') {
    return authority.substr(1, authority.find(']') - 1);
  }
  return authority.substr(0, authority.find(':'));
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Status CheckCaFile(const std::string& ca_file) {
  X509_STORE* probe = X509_STORE_new();
  const bool loaded = probe != nullptr && X509_STORE_load_file(probe, ca_file.c_str()) == 1;
  X509_STORE_free(probe);
  if (!loaded) {
    return InvalidArgument(
        "cannot load the CA file " + ca_file + ": " + OpenSslErrors("no PEM certificate in it"),
        "ca-file");
  }
  return Status::Ok();
}

Status VerifyServer(httplib::Client& http, const std::string& url, const std::string& ca_file) {
  if (url.rfind("https://", 0) != 0) return Status::Ok();
  SSL_CTX* ctx = http.ssl_context();
  if (ctx == nullptr) return InvalidArgument("cannot use TLS for '" + url + "'", "url");
  if (!ca_file.empty()) {
    // httplib reads the file at the first call and then says only "SSL loading certs": read it
    // here too, so that a wrong path is an error that names it, at once.
    EMBODY_RETURN_IF_ERROR(CheckCaFile(ca_file));
    http.set_ca_cert_path(ca_file);
  }
  http.enable_server_certificate_verification(true);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // httplib checks the name too, but falls back to the subject's common name when no
  // subjectAltName matches; OpenSSL's check, made during chain verification, does not.
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_hostflags(
      param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const std::string host = HostOf(url);
  const int set = IsIpAddress(host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                                    : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  if (set != 1) {
    ERR_clear_error();
    return InvalidArgument("cannot verify TLS for host '" + host + "'", "url");
  }
  return Status::Ok();
}

std::string Response::Header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  }
  return "";
}

Result<std::pair<std::string, std::string>> SplitBaseUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("'" + url + "' is not an http:// or https:// URL", "url");
  }
  const size_t host_start = scheme_end + 3;
  const size_t path_start = url.find('/', host_start);
  std::string origin = url.substr(0, path_start);
  if (origin.size() == host_start || origin[host_start] == ':') {
    return InvalidArgument("'" + url + "' names no host", "url");
  }
  std::string prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return std::make_pair(std::move(origin), std::move(prefix));
}

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  auto split = SplitBaseUrl(options.base_url);
  if (!split.ok()) return split.status();
  std::unique_ptr<httplib::Client> http;
  try {
    http = std::make_unique<httplib::Client>(split->first);
  } catch (const std::exception& e) {
    return InvalidArgument("cannot use '" + options.base_url + "': " + e.what(), "url");
  }
  if (!http->is_valid()) {
    return InvalidArgument("cannot use '" + options.base_url + "'", "url");
  }
  SetTimeout(options.connect_timeout_s,
             [&](time_t s, time_t us) { http->set_connection_timeout(s, us); });
  SetTimeout(options.read_timeout_s, [&](time_t s, time_t us) { http->set_read_timeout(s, us); });
  SetTimeout(options.write_timeout_s,
             [&](time_t s, time_t us) { http->set_write_timeout(s, us); });
  http->set_tcp_nodelay(true);
  http->set_keep_alive(true);
  if (!options.bearer_token.empty()) http->set_bearer_token_auth(options.bearer_token);
  EMBODY_RETURN_IF_ERROR(VerifyServer(*http, split->first, options.ca_file));
  std::string prefix = split->second;
  return std::unique_ptr<Client>(new Client(std::move(options), std::move(prefix), std::move(http)));
}

Client::Client(ClientOptions options, std::string prefix, std::unique_ptr<httplib::Client> http)
    : options_(std::move(options)), prefix_(std::move(prefix)), http_(std::move(http)) {}

Client::~Client() = default;

void Client::SetBearerToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  http_->set_bearer_token_auth(token);
}

Status Client::Unreachable(int error, const std::string& request_id) const {
  return Unavailable("cannot reach " + options_.base_url + ": " +
                     httplib::to_string(static_cast<httplib::Error>(error)) + " (request " +
                     request_id + ")");
}

Result<Response> Client::Send(const Request& request) {
  const std::string id = RequestIdFor(request.request_id);
  const httplib::Headers headers = HeadersFor(options_, request, id);
  const std::string path = prefix_ + request.path;
  const std::string& m = request.method;
  const char* type = request.content_type.c_str();
  httplib::Result res{nullptr, httplib::Error::Unknown};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (m == "GET") {
      res = http_->Get(path, headers);
    } else if (m == "POST") {
      res = http_->Post(path, headers, request.body, type);
    } else if (m == "PUT") {
      res = http_->Put(path, headers, request.body, type);
    } else if (m == "PATCH") {
      res = http_->Patch(path, headers, request.body, type);
    } else if (m == "DELETE") {
      res = http_->Delete(path, headers, request.body, type);
    } else {
      return InvalidArgument("unsupported HTTP method '" + m + "'", "method");
    }
  }
  if (!res) return Unreachable(static_cast<int>(res.error()), id);
  Response out;
  out.status = res->status;
  out.body = std::move(res->body);
  out.headers = ToList(res->headers);
  out.request_id = id;
  return out;
}

// httplib's stop() shuts the socket of the call in flight down under its own lock; mu_ is held
// by that call, so it is not taken here.
void Client::Interrupt() { http_->stop(); }

Result<Response> Client::Call(const Request& request) {
  auto r = Send(request);
  if (r.ok() && !r->ok()) return StatusFromResponse(r->status, r->body);
  return r;
}

Status Client::Stream(const std::string& path,
                      const std::function<void(const char*, size_t)>& sink, double read_timeout_s,
                      const std::string& request_id) {
  Request request;
  request.path = path;
  request.request_id = request_id;
  auto r = Get(
      request,
      [&](const char* data, size_t n) {
        sink(data, n);
        return Status::Ok();
      },
      read_timeout_s);
  if (!r.ok()) return r.status();
  if (!r->ok()) return StatusFromResponse(r->status, r->body);
  return Status::Ok();
}

Result<Response> Client::Receive(const Request& request,
                                 const std::function<Status(const char*, size_t)>& sink) {
  return Get(request, sink, options_.read_timeout_s);
}

Result<Response> Client::Get(const Request& request,
                             const std::function<Status(const char*, size_t)>& sink,
                             double read_timeout_s) {
  const std::string id = RequestIdFor(request.request_id);
  Response out;
  out.request_id = id;
  Status sink_error;
  // A 200 to a request for a range past 0 is the whole entity (the server ignored the Range):
  // never handed to a sink that expects the range.
  bool range_ignored = false;
  const bool ranged = std::any_of(request.headers.begin(), request.headers.end(), [](auto& h) {
    return strcasecmp(h.first.c_str(), "Range") == 0 && h.second != "bytes=0-";
  });
  std::lock_guard<std::mutex> lock(mu_);
  SetTimeout(read_timeout_s, [&](time_t s, time_t us) { http_->set_read_timeout(s, us); });
  auto res = http_->Get(
      prefix_ + request.path, HeadersFor(options_, request, id),
      [&](const httplib::Response& r) {
        out.status = r.status;
        out.headers = ToList(r.headers);
        range_ignored = ranged && r.status == 200;
        return !range_ignored;
      },
      [&](const char* data, size_t n) {
        if (out.ok()) {
          sink_error = sink(data, n);
          return sink_error.ok();
        }
        if (out.body.size() < 64 * 1024) out.body.append(data, n);  // an error body is short
        return true;
      });
  SetTimeout(options_.read_timeout_s, [&](time_t s, time_t us) { http_->set_read_timeout(s, us); });
  if (!sink_error.ok()) return sink_error;
  if (range_ignored) return out;
  if (!res) return Unreachable(static_cast<int>(res.error()), id);
  return out;
}

}  // namespace common::http
