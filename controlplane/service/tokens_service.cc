#include "controlplane/service/tokens_service.h"

#include "common/crypto.h"
#include "common/parse_int.h"
#include "common/time_util.h"
#include "controlplane/service/roles.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

constexpr int kMaxAuditLimit = 500;

std::optional<int64_t> Unless0(int64_t id) {
  return id != 0 ? std::optional<int64_t>(id) : std::nullopt;
}

bool ValidTokenName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

Result<int64_t> ParseCursor(const std::string& cursor) {
  auto v = common::ParseInt64(cursor, 1);
  if (!v.ok()) return common::InvalidArgument("bad cursor", "cursor");
  return *v;
}

}  // namespace

api::v1::Token TokenView(const TokenRecord& t) {
  api::v1::Token v;
  v.id = t.id;
  v.tenant_id = t.tenant_id;
  v.tenant = t.tenant;
  v.role = t.role;
  v.name = t.name;
  v.created_ms = t.created_ms;
  v.expires_ms = t.expires_ms;
  v.revoked_ms = t.revoked_ms;
  v.node_id = t.node_id;
  return v;
}

api::v1::AuditEntry AuditView(const AuditRecord& a) {
  api::v1::AuditEntry v;
  v.id = a.id;
  v.time_ms = a.time_ms;
  v.token_id = Unless0(a.token_id);
  v.actor = a.actor;
  v.role = a.role;
  v.tenant_id = Unless0(a.tenant_id);
  v.tenant = a.tenant;
  v.method = a.method;
  v.route = a.route;
  v.path = a.path;
  v.target = a.target;
  v.status = a.status;
  v.outcome = a.outcome;
  v.request_id = a.request_id;
  return v;
}

Result<NewToken> ParseNewToken(const std::string& body, int64_t default_tenant, int64_t now_ms) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgument("request body must be a JSON object");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "role" && it.key() != "name" && it.key() != "tenant_id" &&
        it.key() != "expires_at") {
      return common::InvalidArgument("unknown field", it.key());
    }
  }
  if (!j.contains("role") || !j["role"].is_string()) {
    return common::InvalidArgument("is required: one of tenant-admin, member, viewer", "role");
  }
  if (!j.contains("name") || !j["name"].is_string() ||
      !ValidTokenName(j["name"].get<std::string>())) {
    return common::InvalidArgument("is required: 1-128 printable characters", "name");
  }
  NewToken t;
  t.role = j["role"].get<std::string>();
  t.name = j["name"].get<std::string>();
  t.tenant_id = default_tenant;
  if (j.contains("tenant_id")) {
    if (!j["tenant_id"].is_number_integer() || j["tenant_id"].get<int64_t>() <= 0) {
      return common::InvalidArgument("must be a tenant id", "tenant_id");
    }
    t.tenant_id = j["tenant_id"].get<int64_t>();
  }
  if (j.contains("expires_at") && !j["expires_at"].is_null()) {
    auto at = j["expires_at"].is_string() ? common::ParseUtcTime(j["expires_at"].get<std::string>())
                                          : std::nullopt;
    if (!at) {
      return common::InvalidArgument("must be an RFC 3339 time in UTC, e.g. 2027-01-01T00:00:00Z",
                                     "expires_at");
    }
    if (*at <= now_ms) return common::InvalidArgument("must be in the future", "expires_at");
    t.expires_ms = *at;
  }
  t.now_ms = now_ms;
  return t;
}

Result<api::v1::CreatedToken> TokensService::Create(const Principal& p, const std::string& body) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kTenantAdmin, "creating tokens"));
  EMBODY_ASSIGN_OR_RETURN(t, ParseNewToken(body, p.tenant_id, now_()));
  // Another tenant is named only to a cluster-admin; to anyone else it does not exist.
  if (!p.IsClusterAdmin() && t.tenant_id != p.tenant_id) {
    return Status(common::Code::kNotFound, "tenant " + std::to_string(t.tenant_id) + " not found", "tenant_id");
  }
  EMBODY_RETURN_IF_ERROR(CheckGrant(p, t.role, t.tenant_id));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(t.tenant_id, false));
  if (!tenant) {
    return Status(common::Code::kNotFound, "tenant " + std::to_string(t.tenant_id) + " not found", "tenant_id");
  }
  const std::string secret = common::RandomToken();
  t.sha256_hex = common::Sha256Hex(secret);
  t.created_by = p.token_id;
  EMBODY_ASSIGN_OR_RETURN(id, uow->tenants().CreateToken(t));
  EMBODY_ASSIGN_OR_RETURN(record, uow->tenants().GetToken(id, std::nullopt));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return api::v1::CreatedToken{TokenView(*record), secret};
}

Result<api::v1::TokenList> TokensService::List(const Principal& p, int64_t tenant_id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kTenantAdmin, "listing tokens"));
  std::optional<int64_t> scope = p.TenantScope();
  if (tenant_id > 0) {
    if (scope && *scope != tenant_id) return api::v1::TokenList{};
    scope = tenant_id;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(tokens, uow->tenants().ListTokens(scope));
  api::v1::TokenList out;
  for (const TokenRecord& t : tokens) {
    // A tenant-admin's tenant may hold machine and operator credentials (the bootstrap tenant
    // does): they are the operator's, not listed to the tenant.
    if (!p.IsClusterAdmin() && PersonRank(t.role) > PersonRank(p.role)) continue;
    if (!p.IsClusterAdmin() && PersonRank(t.role) == 0) continue;
    out.tokens.push_back(TokenView(t));
  }
  return out;
}

Result<api::v1::Token> TokensService::Revoke(const Principal& p, int64_t id) {
  if (PersonRank(p.role) == 0) {
    return Status(common::Code::kPermissionDenied, "revoking tokens needs a person's token");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(t, uow->tenants().GetToken(id, p.TenantScope()));
  if (!t) return common::NotFound("token " + std::to_string(id) + " not found");
  // Anyone may revoke their own token; otherwise the rules of granting apply.
  if (t->id != p.token_id) {
    if (!p.IsClusterAdmin() && PersonRank(t->role) == 0) {
      return common::NotFound("token " + std::to_string(id) + " not found");
    }
    // A cluster-admin may also revoke a node credential (CheckGrant covers grantable roles
    // only): its agent registers again with the join token once the node is DOWN.
    if (!(p.IsClusterAdmin() && t->role == kNodeRole)) {
      EMBODY_RETURN_IF_ERROR(CheckGrant(p, t->role, t->tenant_id));
    }
  }
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(uow->tenants().RevokeToken(id, now));
  EMBODY_ASSIGN_OR_RETURN(after, uow->tenants().GetToken(id, std::nullopt));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return TokenView(*after);
}

api::v1::WhoAmI TokensService::WhoAmI(const Principal& p) const {
  return {p.token_id, p.token_name, p.tenant_id, p.tenant, p.role, p.node_id};
}

Result<api::v1::AuditPage> TokensService::Audit(const Principal& p, int limit, const std::string& cursor) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kTenantAdmin, "reading the audit log"));
  if (limit <= 0 || limit > kMaxAuditLimit) {
    return common::InvalidArgument("limit must be in 1..500", "limit");
  }
  AuditQuery q;
  q.tenant_id = p.TenantScope();
  q.limit = limit + 1;
  if (!cursor.empty()) {
    EMBODY_ASSIGN_OR_RETURN(before, ParseCursor(cursor));
    q.before_id = before;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(rows, uow->audit().List(q));
  api::v1::AuditPage page;
  if (static_cast<int>(rows.size()) > limit) {
    rows.resize(limit);
    page.next_cursor = std::to_string(rows.back().id);
  }
  for (const AuditRecord& a : rows) page.entries.push_back(AuditView(a));
  return page;
}

}  // namespace controlplane::service
