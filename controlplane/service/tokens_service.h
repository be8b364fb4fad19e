// Bearer tokens as people manage them, the caller's own identity, and the audit log.
//
// A token's secret (256 random bits, hex) is returned once, by Create; only its SHA-256 digest is
// stored. Tenant-admins manage tokens of their own tenant, never granting a role above their own;
// cluster-admins manage all, and alone create cluster join tokens (role "agent"). Node
// credentials are issued by registration only (NodeService) and appear here read-only.
#pragma once

#include <string>

#include "api/v1/audit.h"
#include "api/v1/token.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class TokensService {
 public:
  TokensService(Database& db, Clock now) : db_(db), now_(std::move(now)) {}

  // {"role", "name", "tenant_id"? (default: the caller's), "expires_at"? (RFC 3339, future)}
  // -> the token and its secret.
  Result<api::v1::CreatedToken> Create(const Principal& p, const std::string& body);
  // `tenant_id` 0: every tenant the caller may see.
  Result<api::v1::TokenList> List(const Principal& p, int64_t tenant_id);
  Result<api::v1::Token> Revoke(const Principal& p, int64_t id);
  api::v1::WhoAmI WhoAmI(const Principal& p) const;

  // Audit rows the caller may read: cluster-admins all, tenant-admins their tenant's.
  Result<api::v1::AuditPage> Audit(const Principal& p, int limit, const std::string& cursor);

 private:
  Database& db_;
  Clock now_;
};

// Parses the body of a token create: {"role", "name", "tenant_id"? (default: `default_tenant`),
// "expires_at"? (RFC 3339 UTC, after `now_ms`)}. Unknown fields, wrong types and bad values are
// invalid_argument naming the field. Whether the caller may grant the role is not decided here.
Result<NewToken> ParseNewToken(const std::string& body, int64_t default_tenant, int64_t now_ms);

// What the API shows of a stored token and of an audit row.
api::v1::Token TokenView(const TokenRecord& t);
api::v1::AuditEntry AuditView(const AuditRecord& a);

}  // namespace controlplane::service
