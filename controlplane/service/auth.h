// Authentication and first-start bootstrap.
//
// Authenticate resolves an "Authorization: Bearer <token>" header to a Principal by the token's
// SHA-256 digest. Bootstrap, on an empty database, creates tenant "default", a cluster-admin
// token and an agent token; later starts create nothing. The plain tokens exist only in its
// result: the caller prints them once.
#pragma once

#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

Result<Principal> Authenticate(Database& db, const std::string& authorization_header);

struct BootstrapResult {
  bool created = false;
  std::string tenant;
  std::string admin_token;
  std::string agent_token;
};

Result<BootstrapResult> Bootstrap(Database& db);

}  // namespace controlplane::service
