// embody-server assembled: connect to PostgreSQL, migrate, bootstrap, start the scheduler loop
// and the HTTP API. main.cc and the in-process tests both start the server through here.
#pragma once

#include <memory>

#include "common/status.h"
#include "controlplane/flags.h"
#include "controlplane/service/auth.h"

namespace controlplane {

class Server {
 public:
  // Returns once the port is bound and requests are being served.
  static common::Result<std::unique_ptr<Server>> Start(const ServerOptions& opts);
  ~Server();

  int port() const;
  // Tokens created by this start (created == false on an already bootstrapped database).
  const service::BootstrapResult& bootstrap() const;
  // Stops serving and the scheduler; idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace controlplane
