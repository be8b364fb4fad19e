// Terminal rendering of tenants, tokens, the caller's identity, the audit log and nodes: tables
// and "key: value" blocks from the server's JSON. Missing or null values print as "-".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace cli {

// A value for a table cell: strings as they are, null or absent as "-", others as JSON.
std::string Cell(const nlohmann::json& j, const char* key);

// GET /v1/tenants: ID NAME WEIGHT SLOTS RUNNING PENDING NODES/JOB STORAGE GIB VERSION, the quota
// columns as "in use/limit" ("8/64", "2/-" when there is no limit; storage in GiB, "0.50/10.00").
std::string TenantsTable(const nlohmann::json& reply);
std::string TenantDetail(const nlohmann::json& tenant);

// GET /v1/tokens: ID TENANT ROLE NAME CREATED EXPIRES STATE (active, expired or revoked, as of
// `now_ms`).
std::string TokensTable(const nlohmann::json& reply, int64_t now_ms);
std::string TokenDetail(const nlohmann::json& token);

std::string WhoAmIText(const nlohmann::json& whoami);
// GET /v1/tenants/{id}/usage: one line per day, slot type and token, then the totals in hours.
std::string UsageTable(const nlohmann::json& usage);

// Audit entries (the "entries" of GET /v1/audit): TIME ACTOR ROLE TENANT METHOD ROUTE TARGET
// STATUS OUTCOME.
std::string AuditTable(const nlohmann::json& entries);

// GET /v1/nodes: ID NAME ADDRESS STATE CPU GPUS USED DRAINING LAST HEARTBEAT.
std::string NodesTable(const nlohmann::json& reply);

}  // namespace cli
