// quota.storage_bytes through the real server, on both stores (server_test_fixture.h): a
// cluster-admin sets it with PATCH /v1/tenants/{id} (bounds checked, 400 naming the field), the
// tenant reads what it holds in usage.storage_bytes, a dataset upload past it is 429
// resource_exhausted naming the bytes, deleting a version frees them, and two uploads of one
// tenant racing for the last room are serialised: exactly one is admitted, however their
// requests interleave.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto.h"
#include "controlplane/testing/server_test_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

class StorageQuotaRoutesTest : public ServerTest {
 protected:
  static void SetUpTestSuite() { StartServer("storage-quota"); }

  // A tenant with quota.storage_bytes `quota`; returns its id and a member's token.
  static std::pair<int64_t, std::string> TenantWithQuota(const std::string& name, int64_t quota) {
    Reply t = Call("POST", "/v1/tenants", Admin(),
                   json{{"name", name}, {"quota", {{"storage_bytes", quota}}}}.dump());
    EXPECT_EQ(t.status, 201) << t.text;
    const int64_t id = t.body.value("id", int64_t{0});
    Reply k = Call("POST", "/v1/tokens", Admin(),
                   json{{"tenant_id", id}, {"role", "member"}, {"name", name + "-member"}}.dump());
    EXPECT_EQ(k.status, 201) << k.text;
    return {id, k.body.value("token", "")};
  }
  // Starts an upload of `bytes` (declared; no byte is sent).
  static Reply StartUpload(const std::string& token, const std::string& name, int64_t bytes) {
    return Call("POST", "/v1/datasets", token,
                json{{"name", name},
                     {"source",
                      {{"upload", {{"bytes", bytes}, {"sha256", common::Sha256Hex(name)}}},
                       {"filter", "train"}}}}
                    .dump());
  }
  static json UsageOf(int64_t tenant, const std::string& token) {
    Reply r = Call("GET", "/v1/tenants/" + std::to_string(tenant), token);
    EXPECT_EQ(r.status, 200) << r.text;
    return r.body["usage"];
  }
};

TEST_F(StorageQuotaRoutesTest, SetShownEnforcedAndFreed) {
  auto [id, member] = TenantWithQuota("quota-co", 1000);
  const std::string path = "/v1/tenants/" + std::to_string(id);
  EXPECT_EQ(Call("GET", path, member).body["quota"]["storage_bytes"], 1000);
  EXPECT_EQ(UsageOf(id, member)["storage_bytes"], 0);
  // Bounds: refused whole, naming the field; a member does not set it.
  for (const json& bad : {json(-1), json((int64_t{1} << 50) + 1), json("10G")}) {
    Reply r = Call("PATCH", path, Admin(), json{{"quota", {{"storage_bytes", bad}}}}.dump());
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["field"], "quota.storage_bytes") << r.text;
  }
  EXPECT_EQ(Call("PATCH", path, member, R"({"quota":{"storage_bytes":null}})").status, 403);
  Reply first = StartUpload(member, "first", 700);
  ASSERT_EQ(first.status, 201) << first.text;
  Reply over = StartUpload(member, "second", 301);
  EXPECT_EQ(over.status, 429) << over.text;
  EXPECT_EQ(over.body["error"]["code"], "resource_exhausted");
  EXPECT_EQ(over.body["error"]["field"], "source.upload.bytes");
  EXPECT_EQ(over.body["error"]["message"],
            "tenant quota-co holds 700 bytes of datasets, images and checkpoints; 301 more exceed "
            "its quota.storage_bytes of 1000");
  EXPECT_EQ(UsageOf(id, member)["storage_bytes"], 700);
  // Deleting the version frees its bytes.
  Reply del = Call("DELETE", "/v1/datasets/" + first.body["id"].dump(), member);
  ASSERT_EQ(del.status, 200) << del.text;
  EXPECT_EQ(UsageOf(id, member)["storage_bytes"], 0);
  EXPECT_EQ(StartUpload(member, "second", 301).status, 201);
  // Raised by a cluster-admin: room again.
  Reply raised = Call("PATCH", path, Admin(), R"({"quota":{"storage_bytes":2000}})");
  ASSERT_EQ(raised.status, 200) << raised.text;
  EXPECT_EQ(raised.body["usage"]["storage_bytes"], 301);
  EXPECT_EQ(StartUpload(member, "third", 1699).status, 201);
}

TEST_F(StorageQuotaRoutesTest, ConcurrentUploadsOfOneTenantCannotBothTakeTheLastRoom) {
  constexpr int kRounds = 6;
  constexpr int kRacers = 3;  // within the default of 4 uploads in progress per tenant
  for (int round = 0; round < kRounds; ++round) {
    auto [id, member] = TenantWithQuota("race-" + std::to_string(round), 1000);
    std::atomic<int> ready{0};
    std::vector<Reply> replies(kRacers);
    std::vector<std::thread> racers;
    for (int i = 0; i < kRacers; ++i) {
      racers.emplace_back([&, i, token = member] {
        ready.fetch_add(1);
        while (ready.load() < kRacers) std::this_thread::yield();
        replies[i] = StartUpload(token, "racer-" + std::to_string(i), 600);
      });
    }
    for (std::thread& t : racers) t.join();
    int admitted = 0;
    for (const Reply& r : replies) {
      if (r.status == 201) {
        ++admitted;
        continue;
      }
      EXPECT_EQ(r.status, 429) << r.text;
      EXPECT_NE(r.text.find("quota.storage_bytes of 1000"), std::string::npos) << r.text;
    }
    EXPECT_EQ(admitted, 1) << "round " << round;
    EXPECT_EQ(UsageOf(id, member)["storage_bytes"], 600) << "round " << round;
  }
}

}  // namespace
}  // namespace controlplane
