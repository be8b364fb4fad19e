// A bearer token as the API shows it (GET /v1/tokens, DELETE /v1/tokens/{id}), the one just
// created with its secret (POST /v1/tokens), and the caller's own identity (GET /v1/whoami);
// schemas Token, TokenCreated, TokenList and WhoAmI of docs/api/openapi.yaml. What a client
// writes (TokenCreate) is parsed by the server's rules (controlplane/service/tokens_service.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

struct Token {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string role;
  std::string name;
  int64_t created_ms = 0;
  std::optional<int64_t> expires_ms;  // nullopt: never (null on the wire)
  std::optional<int64_t> revoked_ms;  // nullopt: live (null on the wire)
  int64_t node_id = 0;                // role "node" only; 0: absent on the wire
  bool operator==(const Token&) const = default;
};

// POST /v1/tokens: the token and its secret, shown in this answer only.
struct CreatedToken {
  Token token;
  std::string secret;  // "token" on the wire
  bool operator==(const CreatedToken&) const = default;
};

struct TokenList {
  std::vector<Token> tokens;
  bool operator==(const TokenList&) const = default;
};

struct WhoAmI {
  int64_t token_id = 0;
  std::string name;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string role;
  int64_t node_id = 0;  // role "node" only; 0: absent on the wire
  bool operator==(const WhoAmI&) const = default;
};

nlohmann::json ToJson(const Token& t);
nlohmann::json ToJson(const CreatedToken& t);
nlohmann::json ToJson(const TokenList& l);
nlohmann::json ToJson(const WhoAmI& w);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Token> ParseToken(const nlohmann::json& j);
common::Result<CreatedToken> ParseCreatedToken(const nlohmann::json& j);
common::Result<TokenList> ParseTokenList(const nlohmann::json& j);
common::Result<WhoAmI> ParseWhoAmI(const nlohmann::json& j);

}  // namespace api::v1
