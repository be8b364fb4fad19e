// Terminal rendering of tenants, tokens, the caller's identity, the audit log and nodes: tables
// and "key: value" blocks of the api/v1 views, read from the server's JSON by their codecs
// (commands.cc). No limit and no value print as "-".
#pragma once

#include <cstdint>
#include <string>

#include <vector>

#include <nlohmann/json.hpp>

#include "api/v1/audit.h"
#include "api/v1/node.h"
#include "api/v1/tenant.h"
#include "api/v1/token.h"

namespace cli {

// A value for a table cell: strings as they are, null or absent as "-", others as JSON.
std::string Cell(const nlohmann::json& j, const char* key);

// GET /v1/tenants: ID NAME WEIGHT SLOTS RUNNING PENDING NODES/JOB STORAGE GIB VERSION, the quota
// columns as "in use/limit" ("8/64", "2/-" when there is no limit; storage in GiB, "0.50/10.00").
std::string TenantsTable(const api::v1::TenantList& reply);
std::string TenantDetail(const api::v1::Tenant& tenant);

// GET /v1/tokens: ID TENANT ROLE NAME CREATED EXPIRES STATE (active, expired or revoked, as of
// `now_ms`).
std::string TokensTable(const api::v1::TokenList& reply, int64_t now_ms);
// POST /v1/tokens: the token and its secret.
std::string TokenDetail(const api::v1::CreatedToken& created);

std::string WhoAmIText(const api::v1::WhoAmI& whoami);
// GET /v1/tenants/{id}/usage: one line per day, slot type and token, then the totals in hours.
std::string UsageTable(const api::v1::TenantUsage& usage);

// Audit entries (the "entries" of GET /v1/audit): TIME ACTOR ROLE TENANT METHOD ROUTE TARGET
// STATUS OUTCOME.
std::string AuditTable(const std::vector<api::v1::AuditEntry>& entries);

// GET /v1/nodes: ID NAME ADDRESS STATE CPU GPUS USED DRAINING LAST HEARTBEAT.
std::string NodesTable(const api::v1::NodeList& reply);

}  // namespace cli
