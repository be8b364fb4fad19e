// Authentication and first-start bootstrap.
//
// Authenticate resolves an "Authorization: Bearer <token>" header to a Principal by the token's
// SHA-256 digest; the stored digest is compared again in constant time, and an expired or revoked
// token is refused (401, saying which) from the first request after its expiry or revocation.
// With a PrincipalCache (principal_cache.h) a live token found once is not looked up again
// until something that could change its answer commits; without one, every call reads the
// token in a transaction of its own.
// Bootstrap, on an empty database, creates tenant "default", a cluster-admin token and the
// cluster join token (role "agent"); later starts create nothing. The plain tokens exist only in
// its result: the caller prints them once.
#pragma once

#include <cstdint>
#include <string>

#include "controlplane/service/store.h"

namespace controlplane::service {

class PrincipalCache;

Result<Principal> Authenticate(Database& db, const std::string& authorization_header,
                               int64_t now_ms);
// `cache` may be null (no cache). The database must be the PrincipalWatchedDatabase that clears
// `cache`, or one beneath it, for every write to go through the watched one.
Result<Principal> Authenticate(Database& db, PrincipalCache* cache,
                               const std::string& authorization_header, int64_t now_ms);

struct BootstrapResult {
  bool created = false;
  std::string tenant;
  std::string admin_token;
  std::string agent_token;  // the cluster join token
};

Result<BootstrapResult> Bootstrap(Database& db, int64_t now_ms);

}  // namespace controlplane::service
