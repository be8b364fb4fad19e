#include "controlplane/service/principal_cache.h"

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/forwarding_unit_of_work.h"
#include "controlplane/service/leader_fence.h"

namespace controlplane::service {

std::optional<TokenMatch> PrincipalCache::Get(const std::string& digest, uint64_t* epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  *epoch = epoch_;
  if (enabled_) {
    auto it = entries_.find(digest);
    if (it != entries_.end()) {
      ++hits_;
      return it->second;
    }
  }
  ++misses_;
  return std::nullopt;
}

void PrincipalCache::Put(const std::string& digest, const TokenMatch& m, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_ || epoch != epoch_ || entries_.size() >= max_entries_) return;
  entries_[digest] = m;
}

void PrincipalCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  ++clears_;
  entries_.clear();
}

void PrincipalCache::SetEnabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  // Both ways: entries kept before the cache went off may be stale by the time it is back on.
  ++epoch_;
  entries_.clear();
  enabled_ = enabled;
}

PrincipalCache::Stats PrincipalCache::GetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{hits_, misses_, clears_, entries_.size(), enabled_};
}

namespace {

// The inner tenant store, noting the calls that change what FindToken answers.
class WatchedTenantStore : public TenantStore {
 public:
  explicit WatchedTenantStore(TenantStore& inner) : inner_(inner) {}
  bool changed() const { return changed_; }

  Status LockBootstrap() override { return inner_.LockBootstrap(); }
  Result<int64_t> CountTenants() override { return inner_.CountTenants(); }
  Result<int64_t> CreateTenant(const TenantRecord& t, int64_t now_ms) override {
    return inner_.CreateTenant(t, now_ms);
  }
  Result<std::optional<TenantRecord>> GetTenant(int64_t id, bool for_update) override {
    return inner_.GetTenant(id, for_update);
  }
  Result<std::vector<TenantRecord>> ListTenants(std::optional<int64_t> only) override {
    return inner_.ListTenants(only);
  }
  // The tenant's name is part of the principal (and of every audit row it writes).
  Status UpdateTenant(const TenantRecord& t, int64_t now_ms) override {
    changed_ = true;
    return inner_.UpdateTenant(t, now_ms);
  }
  Result<TenantUsageNow> UsageNow(int64_t tenant_id) override { return inner_.UsageNow(tenant_id); }
  Result<int64_t> CreateToken(const NewToken& t) override { return inner_.CreateToken(t); }
  Result<std::vector<TokenRecord>> ListTokens(std::optional<int64_t> tenant_id) override {
    return inner_.ListTokens(tenant_id);
  }
  Result<std::optional<TokenRecord>> GetToken(int64_t id,
                                              std::optional<int64_t> tenant_id) override {
    return inner_.GetToken(id, tenant_id);
  }
  Status RevokeToken(int64_t id, int64_t now_ms) override {
    changed_ = true;
    return inner_.RevokeToken(id, now_ms);
  }
  Result<bool> HasLiveNodeToken(int64_t node_id, int64_t now_ms) override {
    return inner_.HasLiveNodeToken(node_id, now_ms);
  }
  Status RevokeNodeTokens(int64_t node_id, int64_t now_ms) override {
    changed_ = true;
    return inner_.RevokeNodeTokens(node_id, now_ms);
  }
  Result<std::optional<TokenMatch>> FindToken(const std::string& sha256_hex) override {
    return inner_.FindToken(sha256_hex);
  }

 private:
  TenantStore& inner_;
  bool changed_ = false;
};

class WatchedUnitOfWork : public ForwardingUnitOfWork {
 public:
  WatchedUnitOfWork(std::unique_ptr<UnitOfWork> inner, PrincipalCache& cache)
      : ForwardingUnitOfWork(std::move(inner)), tenants_(this->inner().tenants()), cache_(cache) {}
  TenantStore& tenants() override { return tenants_; }
  Status Commit() override {
    Status st = inner().Commit();
    // Also when COMMIT failed: a lost connection leaves it unknown whether it committed.
    if (tenants_.changed()) cache_.Clear();
    return st;
  }

 private:
  WatchedTenantStore tenants_;
  PrincipalCache& cache_;
};

}  // namespace

Result<std::unique_ptr<UnitOfWork>> PrincipalWatchedDatabase::Begin() {
  EMBODY_ASSIGN_OR_RETURN(uow, inner_.Begin());
  return std::unique_ptr<UnitOfWork>(new WatchedUnitOfWork(std::move(uow), cache_));
}

}  // namespace controlplane::service
