// The checkpoint blob routes over HTTP, on both stores: the agent's client (storage's
// HttpCheckpointStore) against the real server — upload in chunks, list, ranged and whole
// downloads, delete — and the routes' scoping as the tenants and nodes see it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/crypto.h"
#include "common/file_util.h"
#include "controlplane/testing/server_test_fixture.h"
#include "storage/checkpoint_http_store.h"

namespace controlplane {
namespace {

using nlohmann::json;

class CheckpointRoutesTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    StartServer("ckpt-routes", /*heartbeat_interval_ms=*/60'000);
    node_ = RegisterNode("worker", 1);
    other_node_ = RegisterNode("other", 0);
    Reply j = Call("POST", "/v1/jobs", Admin(),
                   json{{"name", "ckpt"}, {"kind", "train"}, {"resources", {{"nodes", 1}}}}.dump());
    ASSERT_EQ(j.status, 201) << j.text;
    job_ = j.body["id"];
    for (int i = 0; i < 200; ++i) {
      if (Call("GET", "/v1/jobs/" + std::to_string(job_), Admin()).body["state"] == "SCHEDULED") {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  storage::HttpCheckpointStore Store(int64_t node) {
    storage::HttpCheckpointStoreOptions o;
    o.server_url = "http://127.0.0.1:" + std::to_string(server_->port());
    const std::string token = NodeToken(node);
    o.token = [token] { return token; };
    o.chunk_bytes = 100 << 10;
    o.max_retries = 0;
    return storage::HttpCheckpointStore(o);
  }
  std::string JobPath() const { return "/v1/jobs/" + std::to_string(job_) + "/checkpoints"; }

  static inline int64_t node_ = 0, other_node_ = 0, job_ = 0;
};

TEST_F(CheckpointRoutesTest, AgentClientRoundTripThroughTheServer) {
  ASSERT_EQ(Call("GET", "/v1/jobs/" + std::to_string(job_), Admin()).body["state"], "SCHEDULED");
  std::string data(1'000'000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + i / 7);
  const std::string dir = *dir_ + "/client";
  ASSERT_TRUE(common::MakeDirs(dir).ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir + "/step-40.ckpt", data).ok());
  auto src = storage::CheckpointSource::OpenInDir(dir, "step-40.ckpt", data.size());
  ASSERT_TRUE(src.ok());

  auto store = Store(node_);
  auto put = store.Put(job_, 40, {{"loss", 0.5}}, **src);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto list = store.List(job_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].sha256, common::Sha256Hex(data));
  ASSERT_TRUE(store.Get(job_, put->id, dir + "/back.ckpt").ok());
  EXPECT_EQ(*common::ReadFile(dir + "/back.ckpt"), data);

  // People of the tenant list and download, with Range; the job's GET shows the same entry.
  const std::string data_path = JobPath() + "/" + std::to_string(put->id) + "/data";
  Reply listed = Call("GET", JobPath(), Admin());
  ASSERT_EQ(listed.status, 200) << listed.text;
  EXPECT_EQ(listed.body["checkpoints"][0]["metrics"]["loss"], 0.5);
  Reply part = Call("GET", data_path, Admin(), "", {{"Range", "bytes=999990-"}});
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.text, data.substr(999990));
  EXPECT_EQ(part.headers.find("X-Checkpoint-Sha256")->second, common::Sha256Hex(data));
  Reply whole = Call("GET", data_path, Admin());
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.text.size(), data.size());

  // Another tenant, and a node the job is not on, find nothing.
  Reply t = Call("POST", "/v1/tenants", Admin(), json{{"name", "globex"}}.dump());
  ASSERT_EQ(t.status, 201) << t.text;
  Reply tok =
      Call("POST", "/v1/tokens", Admin(),
           json{{"tenant_id", t.body["id"]}, {"role", "tenant-admin"}, {"name", "g"}}.dump());
  ASSERT_EQ(tok.status, 201) << tok.text;
  const std::string globex = tok.body["token"];
  EXPECT_EQ(Call("GET", JobPath(), globex).status, 404);
  EXPECT_EQ(Call("GET", data_path, globex).status, 404);
  EXPECT_EQ(Call("DELETE", JobPath() + "/" + std::to_string(put->id), globex).status, 404);
  EXPECT_EQ(Call("GET", data_path, NodeToken(other_node_)).status, 404);
  EXPECT_EQ(Store(other_node_).List(job_).status().code(), common::Code::kNotFound);
  auto src2 = storage::CheckpointSource::OpenInDir(dir, "step-40.ckpt", data.size());
  EXPECT_EQ(Store(other_node_).Put(job_, 41, {}, **src2).status().code(), common::Code::kNotFound);
  // A person cannot upload; a bad start is a 400.
  const json good = {{"step", 1}, {"bytes", 1}, {"sha256", std::string(64, 'a')}};
  EXPECT_EQ(Call("POST", JobPath(), Admin(), good.dump()).status, 403);
  EXPECT_EQ(Call("POST", JobPath(), NodeToken(node_), R"({"step":1})").status, 400);

  // Committed checkpoints are immutable to nodes; the job's owners delete them.
  EXPECT_EQ(store.Delete(job_, put->id).code(), common::Code::kPermissionDenied);
  EXPECT_LT(Call("DELETE", JobPath() + "/" + std::to_string(put->id), Admin()).status, 300);
  EXPECT_TRUE(store.List(job_)->empty());
  EXPECT_EQ(Call("GET", data_path, Admin()).status, 404);
}

}  // namespace
}  // namespace controlplane
