// Command jobs in an OCI image, end to end (docs/byo.md "Environments"): PostgreSQL +
// embody-server + an agent with a dataset root, on loopback. An image built offline in the test
// with umoci (the static embody-image-probe in an otherwise empty image) is uploaded in chunks as
// a dataset of format "oci", and jobs run in it under the real crun: from inside, the uid is the
// job's, the root is the image's, the job directory is writable and the root is not, the SDK is
// visible, the ranks' variables are there; cancel stops it through SIGTERM; an unknown image is
// refused at submit and a tarball that is no image fails its version. Skipped, saying so,
// without crun and umoci (deploy/setup.sh installs both).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "agent/testing/oci_image.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "tests/e2e/local_stack.h"
#include "tests/e2e/stack_images.h"
#include "tests/support/pg_harness.h"

namespace embody_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ByoImageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!agent::testing::HaveCrunAndUmoci()) return;
    stack_ = new LocalStack(1, 2);
    stack_->EnableDatasetRoot();
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
    auto tar = agent::testing::BuildOciImageTar(stack_->dir() + "/image",
                                                {{EMBODY_IMAGE_PROBE, "/bin/probe"}});
    ASSERT_TRUE(tar.ok()) << tar.status().message();
    auto bytes = common::ReadFile(*tar);
    ASSERT_TRUE(bytes.ok());
    image_ = Upload("probe-env", *bytes);
    ASSERT_EQ(image_.value("state", ""), "ready") << image_.dump(2);
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  void SetUp() override {
    if (!agent::testing::HaveCrunAndUmoci()) {
      GTEST_SKIP() << "crun or umoci not installed (deploy/setup.sh installs both)";
    }
    ASSERT_NE(stack_, nullptr);
  }

  static json Upload(const std::string& name, const std::string& content) {
    return UploadImageThroughApi(*stack_, name, content);
  }
  static int64_t Submit(const json& spec) { return stack_->SubmitJob(spec); }
  static std::string Logs(int64_t id, int rank) { return stack_->JobLog(id, rank); }
  static json InImage(const json& command, int ranks = 1) {
    return json{{"name", "in-image"},
                {"kind", "command"},
                {"resources", {{"nodes", 1}, {"ranks_per_node", ranks}}},
                {"environment", {{"image", "probe-env"}}},
                {"command", command}};
  }

  static LocalStack* stack_;
  static json image_;
};

LocalStack* ByoImageTest::stack_ = nullptr;
json ByoImageTest::image_;

TEST_F(ByoImageTest, TheVersionNamesTheImageByItsDigest) {
  EXPECT_EQ(image_["source"]["format"], "oci");
  EXPECT_EQ(image_["episodes"], 0);
  EXPECT_GT(image_["bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(fs::exists(image_["path"].get<std::string>() + "/index.json"));
}

TEST_F(ByoImageTest, EveryRankRunsInTheImageAsTheJobsUid) {
  const int64_t id =
      Submit(InImage({"/bin/probe", "report", "/bin/probe", "/etc/debian_version"}, 2));
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED")
      << job.dump(2) << Logs(id, -1) << Logs(id, 0) << Logs(id, 1);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = Logs(id, rank);
    // The job's own uid (the agent switches to one from the stack's range, which starts at
    // 200000 and depends on the test's pid: tests/e2e/local_stack.cc), never root.
    EXPECT_EQ(log.find("uid=0\n"), std::string::npos) << log;
    const size_t uid_at = log.find("uid=");
    ASSERT_NE(uid_at, std::string::npos) << log;
    EXPECT_GE(std::atol(log.c_str() + uid_at + 4), 200000) << log;
    EXPECT_NE(log.find("exists /bin/probe=1"), std::string::npos) << log;          // the image's
    EXPECT_NE(log.find("exists /etc/debian_version=0"), std::string::npos) << log;  // not the host's
    EXPECT_NE(log.find("home_writable=1"), std::string::npos) << log;
    EXPECT_NE(log.find("root_writable=0"), std::string::npos) << log;
    EXPECT_NE(log.find("sdk_visible=1"), std::string::npos) << log;
    EXPECT_NE(log.find("RANK=" + std::to_string(rank) + "\n"), std::string::npos) << log;
    EXPECT_NE(log.find("WORLD_SIZE=2\n"), std::string::npos) << log;
    EXPECT_EQ(log.find("MASTER_ADDR=\n"), std::string::npos) << log;
    EXPECT_NE(log.find("EMBODY_JOB_ID=" + std::to_string(id) + "\n"), std::string::npos) << log;
  }
  // The stored spec keeps the name it was given.
  EXPECT_EQ(job["spec"]["environment"], json({{"image", "probe-env"}}));
}

TEST_F(ByoImageTest, CancelReachesTheCommandInsideTheImage) {
  const int64_t id = Submit(InImage({"/bin/probe", "sleep"}));
  ASSERT_GT(id, 0);
  bool sleeping = false;
  for (int i = 0; i < 600 && !sleeping; ++i) {
    sleeping = Logs(id, 0).find("sleeping") != std::string::npos;
    if (!sleeping) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(sleeping) << Logs(id, -1);
  HttpResult c = stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}");
  ASSERT_TRUE(c.status == 200 || c.status == 202) << c.text;
  json job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  std::string log;
  for (int i = 0; i < 50 && log.find("got SIGTERM") == std::string::npos; ++i) {
    log = Logs(id, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(log.find("got SIGTERM"), std::string::npos) << log;
}

// crun runs without a cgroup manager, so the container's processes stay in the cgroup the agent
// made for the job's ranks: its memory limit stops a rank that allocates past it inside the
// image, and the reason says so (the agent read it from that cgroup).
TEST_F(ByoImageTest, TheRanksMemoryLimitHoldsInsideTheImage) {
  HttpResult nodes = stack_->Get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200) << nodes.text;
  ASSERT_FALSE(nodes.body["nodes"].empty()) << nodes.text;
  const std::string cgroup =
      nodes.body["nodes"][0].value("isolation", json::object()).value("cgroup", "none");
  if (cgroup == "none") GTEST_SKIP() << "the agent has no cgroups here: " << nodes.text;
  json spec = InImage({"/bin/probe", "alloc", "512"});
  spec["resources"]["memory_per_rank_bytes"] = 64 << 20;
  const int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2) << Logs(id, 0);
  EXPECT_NE(job.value("reason", "").find("memory limit of 67108864 bytes reached"),
            std::string::npos)
      << job.dump(2) << Logs(id, -1);
  EXPECT_EQ(Logs(id, 0).find("allocated 512 MiB"), std::string::npos) << Logs(id, 0);
  // The same within the limit runs to its end.
  spec["command"] = {"/bin/probe", "alloc", "8"};
  const int64_t small = Submit(spec);
  ASSERT_GT(small, 0);
  job = stack_->WaitForState(small, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(small, -1);
  EXPECT_NE(Logs(small, 0).find("allocated 8 MiB"), std::string::npos) << Logs(small, 0);
}

// What the docs tell a tenant to run: `embody datasets upload NAME FILE.tar --format oci`. The
// same tar gives the same image (its manifest digest), and a job runs in the new version.
TEST_F(ByoImageTest, TheCliUploadsAndImportsAnImage) {
  const std::string tar = stack_->dir() + "/image/image.tar";
  ASSERT_TRUE(fs::exists(tar)) << tar;
  auto run = embody::testing::RunCommand(
      {"env", "EMBODY_URL=" + stack_->url(), "EMBODY_TOKEN=" + stack_->admin_token(),
       LocalStack::bin_dir() + "/embody", "datasets", "upload", "probe-cli", tar, "--format",
       "oci", "-o", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const size_t brace = run.output.find("{\"");
  ASSERT_NE(brace, std::string::npos) << run.output;
  json v = json::parse(run.output.substr(brace), nullptr, false);
  ASSERT_TRUE(v.is_object()) << run.output;
  const std::string at = "/v1/datasets/" + std::to_string(v["id"].get<int64_t>());
  json d = stack_->Get(at).body;
  for (int i = 0; i < 1200 && d.value("state", "") != "ready" && d.value("state", "") != "failed";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d = stack_->Get(at).body;
  }
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["source"]["format"], "oci") << d.dump(2);
  EXPECT_EQ(d["bytes"], image_["bytes"]) << d.dump(2);
  EXPECT_TRUE(fs::exists(d["path"].get<std::string>() + "/index.json"));
  json spec = InImage({"/bin/probe", "report", "/bin/probe"});
  spec["environment"]["image"] = "probe-cli@1";
  const int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1);
  EXPECT_NE(Logs(id, 0).find("exists /bin/probe=1"), std::string::npos) << Logs(id, 0);
}

TEST_F(ByoImageTest, AnUnknownImageIsRefusedAtSubmitAndATarballThatIsNoImageFails) {
  json unknown = InImage({"/bin/probe"});
  unknown["environment"]["image"] = "no-such-image";
  HttpResult r = stack_->Post("/v1/jobs", unknown.dump());
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_EQ(r.body["error"]["field"], "environment.image") << r.text;
  EXPECT_NE(r.text.find("no-such-image"), std::string::npos) << r.text;

  json bad = Upload("broken-env", std::string(4096, 'x'));
  EXPECT_EQ(bad.value("state", ""), "failed") << bad.dump(2);
  EXPECT_FALSE(bad.value("error", "").empty()) << bad.dump(2);
  // A failed version is no image to run.
  json spec = InImage({"/bin/probe"});
  spec["environment"]["image"] = "broken-env";
  r = stack_->Post("/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 422) << r.text;
}

}  // namespace
}  // namespace embody_test
