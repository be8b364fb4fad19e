// OCI images pulled from a registry the operator configured, end to end (docs/byo.md "An OCI
// image"): Debian's docker-registry (the Distribution registry, v2) started by the test on a free
// loopback port with its storage in the test's directory; an image built offline with umoci (the
// static embody-image-probe in an otherwise empty image) pushed into it with skopeo; the server
// started with `--image-registry local=http://127.0.0.1:PORT`. A tenant pulls it through the API
// and the CLI, by tag and by digest, and a command job runs in the pulled version under crun. An
// unconfigured host, a reference that names a host or would be an option are refused with
// nothing stored; a tag the registry does not have fails its version with skopeo's reason and
// publishes nothing. Skipped, saying so, without crun and umoci or without skopeo and
// docker-registry (deploy/setup.sh installs all four).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/testing/oci_image.h"
#include "common/file_util.h"
#include "tests/e2e/local_stack.h"
#include "tests/support/pg_harness.h"

namespace embody_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool HaveSkopeoAndRegistry() {
  return std::system("command -v skopeo >/dev/null 2>&1") == 0 &&
         fs::exists("/usr/bin/docker-registry");
}

bool HaveEverything() { return agent::testing::HaveCrunAndUmoci() && HaveSkopeoAndRegistry(); }

// docker-registry on 127.0.0.1, port 0: the port it bound is read back from its log.
class LocalRegistry {
 public:
  bool Start(const std::string& dir) {
    fs::create_directories(dir + "/data");
    const std::string config = dir + "/config.yml";
    std::ofstream(config) << "version: 0.1\n"
                             "log:\n  level: info\n  formatter: text\n"
                             "storage:\n  filesystem:\n    rootdirectory: "
                          << dir
                          << "/data\n"
                             "http:\n  addr: 127.0.0.1:0\n";
    log_ = dir + "/registry.log";
    if (!process_.Start({"/usr/bin/docker-registry", "serve", config}, log_).ok()) return false;
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto text = common::ReadFile(log_);
      const std::string needle = "listening on 127.0.0.1:";
      const size_t at = text.ok() ? text->find(needle) : std::string::npos;
      if (at != std::string::npos) port_ = std::atoi(text->c_str() + at + needle.size());
    }
    return port_ > 0;
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& log() const { return log_; }

 private:
  embody::testing::ChildProcess process_;
  std::string log_;
  int port_ = 0;
};

class ByoImageRegistryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveEverything()) return;
    dir_ = fs::temp_directory_path().string() + "/embody-registry-" + std::to_string(::getpid());
    const std::string& dir = dir_;
    fs::remove_all(dir);
    registry_ = new LocalRegistry();
    ASSERT_TRUE(registry_->Start(dir)) << "docker-registry did not start: see " << registry_->log();
    // The image, built offline, pushed as embody/probe:1.
    auto tar =
        agent::testing::BuildOciImageTar(dir + "/image", {{EMBODY_IMAGE_PROBE, "/bin/probe"}});
    ASSERT_TRUE(tar.ok()) << tar.status().message();
    auto push = embody::testing::RunCommand({"skopeo", "copy", "--dest-tls-verify=false",
                                             "oci:" + dir + "/image/layout:t",
                                             "docker://" + registry_->host() + "/embody/probe:1"});
    ASSERT_EQ(push.exit_code, 0) << push.output;
    auto index = common::ReadFile(dir + "/image/layout/index.json");
    ASSERT_TRUE(index.ok());
    digest_ = json::parse(*index)["manifests"][0]["digest"].get<std::string>();

    stack_ = new LocalStack(1, 2);
    stack_->EnableDatasetRoot();
    stack_->AddServerFlags({"--image-registry", "local=http://" + registry_->host()});
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
    delete registry_;
    registry_ = nullptr;
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (!agent::testing::HaveCrunAndUmoci()) {
      GTEST_SKIP() << "crun or umoci not installed (deploy/setup.sh installs both)";
    }
    if (!HaveSkopeoAndRegistry()) {
      GTEST_SKIP() << "skopeo or docker-registry not installed (deploy/setup.sh installs both)";
    }
    ASSERT_NE(stack_, nullptr);
  }

  static HttpResult Pull(const std::string& name, const std::string& registry,
                         const std::string& reference) {
    json body{{"name", name},
              {"source", {{"format", "oci"}, {"registry", registry}, {"reference", reference}}}};
    return stack_->Post("/v1/datasets", body.dump());
  }
  // Polls the version until its import has ended (120 s at most).
  static json WaitForImport(int64_t id) {
    const std::string at = "/v1/datasets/" + std::to_string(id);
    json d = stack_->Get(at).body;
    for (int i = 0; i < 1200 && d.value("state", "") == "importing"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      d = stack_->Get(at).body;
    }
    return d;
  }
  static size_t Versions(const std::string& name) {
    return stack_->Get("/v1/datasets?name=" + name).body.value("datasets", json::array()).size();
  }
  static std::string Logs(int64_t id, int rank) {
    return stack_->Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank))
        .text;
  }
  // A command job in `image` that reports from inside; its log, once it succeeded.
  static std::string RunIn(const std::string& image) {
    json spec{{"name", "in-pulled-image"},
              {"kind", "command"},
              {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
              {"environment", {{"image", image}}},
              {"command", {"/bin/probe", "report", "/bin/probe", "/etc/debian_version"}}};
    HttpResult r = stack_->Post("/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    if (r.status != 201) return "";
    const int64_t id = r.body["id"].get<int64_t>();
    json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
    EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << Logs(id, -1) << Logs(id, 0);
    return Logs(id, 0);
  }

  static LocalRegistry* registry_;
  static LocalStack* stack_;
  static std::string digest_;
  static std::string dir_;
};

LocalRegistry* ByoImageRegistryTest::registry_ = nullptr;
LocalStack* ByoImageRegistryTest::stack_ = nullptr;
std::string ByoImageRegistryTest::digest_;
std::string ByoImageRegistryTest::dir_;

TEST_F(ByoImageRegistryTest, APulledImageRecordsWhereItCameFromAndRunsAJob) {
  HttpResult r = Pull("probe-pulled", "local", "embody/probe:1");
  ASSERT_EQ(r.status, 201) << r.text;
  json d = WaitForImport(r.body["id"].get<int64_t>());
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["source"], json({{"format", "oci"},
                               {"registry", "local"},
                               {"reference", "embody/probe:1"},
                               {"registry_url", "http://" + registry_->host()}}))
      << d.dump(2);
  // The image pulled is the one pushed: its manifest digest names it.
  EXPECT_EQ(d["manifest"]["image"]["digest"], digest_) << d.dump(2);
  EXPECT_TRUE(fs::exists(d["path"].get<std::string>() + "/index.json"));

  const std::string log = RunIn("probe-pulled");
  EXPECT_NE(log.find("exists /bin/probe=1"), std::string::npos) << log;           // the image's
  EXPECT_NE(log.find("exists /etc/debian_version=0"), std::string::npos) << log;  // not the host's
  EXPECT_NE(log.find("root_writable=0"), std::string::npos) << log;
}

// What the docs tell a tenant to run, pinned by digest and naming the registry by its host.
TEST_F(ByoImageRegistryTest, TheCliPullsByDigest) {
  auto run = embody::testing::RunCommand(
      {"env", "EMBODY_URL=" + stack_->url(), "EMBODY_TOKEN=" + stack_->admin_token(),
       LocalStack::bin_dir() + "/embody", "datasets", "pull", "probe-digest",
       registry_->host() + "/embody/probe@" + digest_, "-o", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const size_t brace = run.output.find("{\"");
  ASSERT_NE(brace, std::string::npos) << run.output;
  json v = json::parse(run.output.substr(brace), nullptr, false);
  ASSERT_TRUE(v.is_object()) << run.output;
  json d = WaitForImport(v["id"].get<int64_t>());
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["source"]["registry"], "local") << d.dump(2);
  EXPECT_EQ(d["source"]["reference"], "embody/probe@" + digest_) << d.dump(2);
  EXPECT_EQ(d["manifest"]["image"]["digest"], digest_) << d.dump(2);
  const std::string log = RunIn("probe-digest@1");
  EXPECT_NE(log.find("exists /bin/probe=1"), std::string::npos) << log;
  // `embody datasets show` says where it came from.
  run = embody::testing::RunCommand({"env", "EMBODY_URL=" + stack_->url(),
                                     "EMBODY_TOKEN=" + stack_->admin_token(),
                                     LocalStack::bin_dir() + "/embody", "datasets", "show",
                                     std::to_string(d["id"].get<int64_t>())});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("local/embody/probe@" + digest_), std::string::npos) << run.output;
}

TEST_F(ByoImageRegistryTest, AnUnconfiguredHostOrAnInjectedOptionIsRefusedWithNothingStored) {
  struct Case {
    std::string registry, reference, field, says;
  };
  const std::vector<Case> cases = {
      {"ghcr.io", "x/y:1", "source.registry", "not a registry this server pulls from"},
      {"local", "ghcr.io/x/y:1", "source.reference", "names a host"},
      {"local", "--src-creds=me:secret", "source.reference", "REPOSITORY:TAG"},
      {"local", "embody/probe:1 --debug", "source.reference", "tag"},
      {"-local", "embody/probe:1", "source.registry", "registry"},
      {"local", "docker://evil/x:1", "source.reference", ""},
  };
  for (const Case& c : cases) {
    HttpResult r = Pull("refused", c.registry, c.reference);
    EXPECT_EQ(r.status, 400) << c.registry << " " << c.reference << ": " << r.text;
    EXPECT_EQ(r.body["error"]["field"], c.field) << r.text;
    EXPECT_NE(r.text.find(c.says), std::string::npos) << r.text;
  }
  // Nor can a tenant say where a registry is.
  json body{{"name", "refused"},
            {"source",
             {{"format", "oci"},
              {"registry", "local"},
              {"reference", "embody/probe:1"},
              {"registry_url", "http://169.254.169.254"}}}};
  HttpResult r = stack_->Post("/v1/datasets", body.dump());
  EXPECT_EQ(r.status, 400) << r.text;
  EXPECT_EQ(r.body["error"]["field"], "source.registry_url") << r.text;
  EXPECT_EQ(Versions("refused"), 0u);
  // The CLI shows the server's refusal.
  auto run = embody::testing::RunCommand(
      {"env", "EMBODY_URL=" + stack_->url(), "EMBODY_TOKEN=" + stack_->admin_token(),
       LocalStack::bin_dir() + "/embody", "datasets", "pull", "refused", "ghcr.io/x/y:1"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("not a registry this server pulls from"), std::string::npos)
      << run.output;
}

TEST_F(ByoImageRegistryTest, AMissingTagFailsTheVersionWithSkopeosReasonAndPublishesNothing) {
  HttpResult r = Pull("probe-missing", "local", "embody/probe:no-such-tag");
  ASSERT_EQ(r.status, 201) << r.text;
  json d = WaitForImport(r.body["id"].get<int64_t>());
  EXPECT_EQ(d.value("state", ""), "failed") << d.dump(2);
  const std::string error = d.value("error", "");
  EXPECT_NE(error.find("manifest unknown"), std::string::npos) << d.dump(2);
  EXPECT_NE(error.find("embody/probe:no-such-tag"), std::string::npos) << d.dump(2);
  EXPECT_TRUE(d["manifest"].is_null()) << d.dump(2);
  // No directory under the dataset root, no staging left, and nothing a job can run in.
  EXPECT_FALSE(fs::exists(d.value("path", "/nonexistent"))) << d.dump(2);
  const fs::path tenant_dir = fs::path(d.value("path", "/nonexistent")).parent_path();
  EXPECT_FALSE(fs::exists(tenant_dir / (".import-" + std::to_string(d["id"].get<int64_t>()))));
  json spec{{"name", "in-missing"},
            {"kind", "command"},
            {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
            {"environment", {{"image", "probe-missing"}}},
            {"command", {"/bin/probe"}}};
  HttpResult job = stack_->Post("/v1/jobs", spec.dump());
  EXPECT_EQ(job.status, 422) << job.text;
  EXPECT_EQ(job.body["error"]["field"], "environment.image") << job.text;
}

}  // namespace
}  // namespace embody_test
