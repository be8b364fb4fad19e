// A dataset uploaded through the API end to end: a robomimic-layout HDF5 file made here is sent
// in several chunks (one of them twice, as a client does when an answer was lost), committed, and
// imported by a job whose agent fetches the bytes from the server over HTTP (no shared file
// system for them); the version ends ready with the file's episode count, and the uploaded blob
// is gone from the server's directory.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/crypto.h"
#include "common/file_util.h"
#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;


TEST(DatasetUploadTest, ChunksWithARetryCommitImportAndTheBlobGoes) {
  LocalStack stack(/*agents=*/1, /*slots_per_agent=*/1);
  const std::string root = stack.dir() + "/datasets";
  std::filesystem::create_directories(root);
  stack.AddServerFlags({"--dataset-root", root});
  stack.AddAgentFlags({"--dataset-root", root});
  ASSERT_TRUE(stack.Start());

  // The file lives where only this test reads it: the import can only get it through the server.
  const std::string dir = storage::testing::MakeTempDir("e2e_upload");
  const std::string file = dir + "/lift.hdf5";
  storage::testing::RobomimicFileSpec spec;
  spec.demos = 4;
  spec.frames = 10;
  auto made = storage::testing::WriteRobomimicFile(file, spec);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string content = common::ReadFile(file).value();
  ASSERT_GT(content.size(), 3u);

  json body = {{"name", "uploaded-lift"},
               {"source",
                {{"format", "hdf5"},
                 {"upload", {{"bytes", content.size()}, {"sha256", common::Sha256Hex(content)}}}}}};
  HttpResult created = stack.Post("/v1/datasets", body.dump());
  ASSERT_EQ(created.status, 201) << created.text;
  EXPECT_EQ(created.body["state"], "uploading");
  const int64_t id = created.body["id"];
  const std::string upload = "/v1/datasets/" + std::to_string(id) + "/upload";

  httplib::Client c(stack.url());
  c.set_bearer_token_auth(stack.admin_token().c_str());
  const size_t chunk = content.size() / 3 + 1;
  int puts = 0;
  for (size_t off = 0; off < content.size(); off += chunk) {
    const std::string part = content.substr(off, chunk);
    httplib::Headers h{{"X-Content-Sha256", common::Sha256Hex(part)}};
    const int times = off == chunk ? 2 : 1;  // the second chunk is sent twice
    for (int t = 0; t < times; ++t) {
      auto res = c.Put((upload + "?offset=" + std::to_string(off)).c_str(), h, part,
                       "application/octet-stream");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      EXPECT_EQ(json::parse(res->body)["received_bytes"], std::min(off + chunk, content.size()));
      ++puts;
    }
  }
  EXPECT_GE(puts, 4);
  EXPECT_EQ(stack.Get("/v1/datasets/" + std::to_string(id)).body["received_bytes"], content.size());
  const std::string blob = stack.dir() + "/server/dataset-uploads/" + std::to_string(id) + ".hdf5";
  EXPECT_EQ(std::filesystem::file_size(blob), content.size());

  HttpResult committed = stack.Post(upload + "/commit", "{}");
  ASSERT_EQ(committed.status, 200) << committed.text;
  EXPECT_EQ(committed.body["state"], "importing");
  const int64_t job_id = committed.body["job_id"];
  json job = stack.WaitForState(job_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job["state"], "SUCCEEDED") << job.dump() << "\n"
                                       << common::ReadFile(stack.agent_log(0))
                                              .value()
                                              .substr(0, 20000);

  HttpResult ready = stack.Get("/v1/datasets/" + std::to_string(id));
  ASSERT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body["state"], "ready") << ready.text;
  EXPECT_EQ(ready.body["episodes"], 4);
  EXPECT_EQ(ready.body["frames"], 40);
  EXPECT_TRUE(std::filesystem::exists(ready.body["path"].get<std::string>() + "/dataset.json"));

  // The server's sweep removes the blob once the import ended.
  for (int i = 0; i < 100 && std::filesystem::exists(blob); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(std::filesystem::exists(blob)) << blob;
  // Nor does the node keep its copy.
  EXPECT_FALSE(std::filesystem::exists(stack.agent_data_dir(0) + "/jobs/job-" +
                                       std::to_string(job_id) + "/upload.hdf5"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace embody_test
