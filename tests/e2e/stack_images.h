// OCI images for the end-to-end suites (docs/byo.md "Environments"): a tar built offline with
// umoci (agent/testing/oci_image.h) uploaded in chunks as a dataset of format "oci" and imported.
// Header-only, for the suites that link embody_agent_image_testing.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {

// Uploads `content` as the next version of image NAME in two chunks, commits, and waits up to
// 120 s for the import to end; the version's JSON (state "ready" or "failed"), or an empty
// object and a gtest failure when the upload itself was refused.
inline nlohmann::json UploadImageThroughApi(LocalStack& stack, const std::string& name,
                                            const std::string& content) {
  using nlohmann::json;
  json body = {{"name", name},
               {"source",
                {{"format", "oci"},
                 {"upload", {{"bytes", content.size()}, {"sha256", common::Sha256Hex(content)}}}}}};
  HttpResult created = stack.Post("/v1/datasets", body.dump());
  EXPECT_EQ(created.status, 201) << created.text;
  if (created.status != 201) return json::object();
  const std::string at = "/v1/datasets/" + std::to_string(created.body["id"].get<int64_t>());
  httplib::Client c(stack.url());
  c.set_bearer_token_auth(stack.admin_token().c_str());
  const size_t chunk = content.size() / 2 + 1;
  for (size_t off = 0; off < content.size(); off += chunk) {
    auto res = c.Put((at + "/upload?offset=" + std::to_string(off)).c_str(),
                     content.substr(off, chunk), "application/octet-stream");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
  }
  HttpResult committed = stack.Post(at + "/upload/commit", "{}");
  EXPECT_EQ(committed.status, 200) << committed.text;
  json d = committed.body;
  for (int i = 0; i < 1200 && (d.value("state", "") == "importing"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d = stack.Get(at).body;
  }
  return d;
}

}  // namespace embody_test
