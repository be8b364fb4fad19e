// What a bearer token's digest resolved to, kept in memory so that a request is authenticated
// without a transaction of its own, and the database decorator that keeps it true.
//
// Authenticate reads one token row joined with its tenant's name (TenantStore::FindToken). What
// can change that answer: a token revoked (DELETE /v1/tokens/{id}), a node's credentials revoked
// when the join token claims the node again (RevokeNodeTokens), a tenant updated (its name is in
// the principal), and time (expires_at). Roles and a token's node are written once, at creation;
// tenants and tokens are never deleted by the server. So:
//  - an entry keeps the token's expires_at and is checked against the request's clock on every
//    hit (expiry needs no invalidation);
//  - only live tokens are kept, never an unknown, revoked or expired one (a new token is found on
//    its first use without any invalidation);
//  - PrincipalWatchedDatabase's units of work note every call of the TenantStore that changes a
//    principal and clear the whole cache as soon as that unit of work's COMMIT has returned
//    (whatever it answered), before the call that revoked is answered: on this replica the next
//    request is refused;
//  - other replicas clear theirs when PostgreSQL notifies them of the committed change
//    (db/principal_listener.h); while a replica is not listening its cache is off.
//
// A lookup that raced with a clear must not put back what it read before the change: every
// clear advances an epoch, and an entry is added only if the epoch has not moved since before
// its database read. Any read that starts after a clear started after the change committed.
// Revocations are rare, so a clear takes everything rather than the changed rows.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "controlplane/service/store.h"

namespace controlplane::service {

class PrincipalCache {
 public:
  // At most `max_entries` live tokens; past that a miss is looked up but not kept.
  explicit PrincipalCache(size_t max_entries = 100'000) : max_entries_(max_entries) {}

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;  // looked up in the database (the cache off counts here too)
    uint64_t clears = 0;
    size_t entries = 0;
    bool enabled = false;
  };

  // The match kept for `digest` (a live token), or nullopt. `*epoch` gets the epoch to pass
  // to Put after a database read. Expiry is the caller's to check.
  std::optional<TokenMatch> Get(const std::string& digest, uint64_t* epoch);
  // Keeps `m` unless a clear happened since the Get that returned `epoch`, or the cache is off.
  void Put(const std::string& digest, const TokenMatch& m, uint64_t epoch);
  // Drops every entry; lookups in flight do not put theirs back.
  void Clear();
  // Off: every lookup reads the database and nothing is kept (and what was kept is dropped).
  // A new cache is off until its owner knows it will hear of other replicas' changes.
  void SetEnabled(bool enabled);
  Stats GetStats();

 private:
  const size_t max_entries_;
  std::mutex mu_;
  bool enabled_ = false;
  uint64_t epoch_ = 0;
  uint64_t hits_ = 0, misses_ = 0, clears_ = 0;
  std::unordered_map<std::string, TokenMatch> entries_;
};

// A Database whose units of work clear `cache` after committing anything that can change what
// Authenticate answers (see above). Everything else passes through untouched.
class PrincipalWatchedDatabase : public Database {
 public:
  PrincipalWatchedDatabase(Database& inner, PrincipalCache& cache)
      : inner_(inner), cache_(cache) {}
  Result<std::unique_ptr<UnitOfWork>> Begin() override;

 private:
  Database& inner_;
  PrincipalCache& cache_;
};

}  // namespace controlplane::service
