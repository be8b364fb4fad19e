#include "api/v1/token.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

Token ReadToken(FieldReader& r) {
  Token t;
  t.id = r.Int("id");
  t.tenant_id = r.Int("tenant_id");
  t.tenant = r.String("tenant");
  t.role = r.String("role");
  t.name = r.String("name");
  t.created_ms = r.Time("created_at");
  t.expires_ms = r.NullableTime("expires_at");
  t.revoked_ms = r.NullableTime("revoked_at");
  t.node_id = r.OptionalInt("node_id").value_or(0);
  return t;
}

}  // namespace

json ToJson(const Token& t) {
  json j{{"id", t.id},
         {"tenant_id", t.tenant_id},
         {"tenant", t.tenant},
         {"role", t.role},
         {"name", t.name},
         {"created_at", common::FormatTimeMillis(t.created_ms)},
         {"expires_at", TimeOrNull(t.expires_ms)},
         {"revoked_at", TimeOrNull(t.revoked_ms)}};
  if (t.node_id != 0) j["node_id"] = t.node_id;
  return j;
}

json ToJson(const CreatedToken& t) {
  json j = ToJson(t.token);
  j["token"] = t.secret;
  return j;
}

json ToJson(const TokenList& l) {
  json tokens = json::array();
  for (const Token& t : l.tokens) tokens.push_back(ToJson(t));
  return {{"tokens", std::move(tokens)}};
}

json ToJson(const WhoAmI& w) {
  json j{{"token_id", w.token_id},
         {"name", w.name},
         {"tenant_id", w.tenant_id},
         {"tenant", w.tenant},
         {"role", w.role}};
  if (w.node_id != 0) j["node_id"] = w.node_id;
  return j;
}

common::Result<Token> ParseToken(const json& j) { return ReadDocument<Token>(j, ReadToken); }

common::Result<CreatedToken> ParseCreatedToken(const json& j) {
  return ReadDocument<CreatedToken>(j, [](FieldReader& r) {
    CreatedToken t;
    t.token = ReadToken(r);
    t.secret = r.String("token");
    return t;
  });
}

common::Result<TokenList> ParseTokenList(const json& j) {
  return ReadDocument<TokenList>(
      j, [](FieldReader& r) { return TokenList{ReadArray<Token>(r, "tokens", ReadToken)}; });
}

common::Result<WhoAmI> ParseWhoAmI(const json& j) {
  return ReadDocument<WhoAmI>(j, [](FieldReader& r) {
    WhoAmI w;
    w.token_id = r.Int("token_id");
    w.name = r.String("name");
    w.tenant_id = r.Int("tenant_id");
    w.tenant = r.String("tenant");
    w.role = r.String("role");
    w.node_id = r.OptionalInt("node_id").value_or(0);
    return w;
  });
}

}  // namespace api::v1
