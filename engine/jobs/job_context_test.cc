// JobContext: one rule per launch variable, and the spec checks that run before MPI.
#include "engine/jobs/job_context.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <map>
#include <string>

#include "common/file_util.h"

namespace engine {
namespace {

// An environment of exactly these variables.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnvTest, NothingSetIsAFreshRunWithoutAnAgent) {
  LaunchEnv e = LaunchEnv::FromEnvironment(Env({}));
  EXPECT_EQ(e.checkpoint_dir, "./checkpoints");
  EXPECT_EQ(e.resume_from, "");
  EXPECT_EQ(e.job_id, "");
  EXPECT_FALSE(e.Reporter().has_value());
}

TEST(LaunchEnvTest, ReadsEveryVariableTheAgentSets) {
  LaunchEnv e = LaunchEnv::FromEnvironment(Env({{"EMBODY_AGENT_URL", "http://127.0.0.1:9/x"},
                                                {"EMBODY_JOB_ID", "42"},
                                                {"EMBODY_JOB_TOKEN", "tok"},
                                                {"EMBODY_CA_FILE", "/ca.pem"},
                                                {"EMBODY_CHECKPOINT_DIR", "/ck"},
                                                {"EMBODY_RESUME_FROM", "/ck/step-10.ckpt"}}));
  EXPECT_EQ(e.checkpoint_dir, "/ck");
  EXPECT_EQ(e.resume_from, "/ck/step-10.ckpt");
  auto r = e.Reporter();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->agent_url, "http://127.0.0.1:9/x");
  EXPECT_EQ(r->job_id, "42");
  EXPECT_EQ(r->token, "tok");
  EXPECT_EQ(r->ca_file, "/ca.pem");
}

// Before JobContext a train job took an empty EMBODY_RESUME_FROM as set and an rl job as unset;
// now an empty value is no value for every variable and every kind.
TEST(LaunchEnvTest, EmptyValuesAreUnset) {
  LaunchEnv e = LaunchEnv::FromEnvironment(
      Env({{"EMBODY_AGENT_URL", ""}, {"EMBODY_CHECKPOINT_DIR", ""}, {"EMBODY_RESUME_FROM", ""}}));
  EXPECT_EQ(e.resume_from, "");
  EXPECT_EQ(e.checkpoint_dir, "./checkpoints");
  EXPECT_FALSE(e.Reporter().has_value());
}

class JobContextTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    EXPECT_TRUE(common::WriteFileAtomic(path, text).ok());
    return path;
  }
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("job_context_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(JobContextTest, ParsesTheSpecAndTheEnvironment) {
  std::string path = Write("rl.json", R"({"name": "t", "kind": "rl",
      "resources": {"nodes": 1, "ranks_per_node": 1}, "engine": {"rl": {"task": "reach"}}})");
  auto ctx = JobContext::Parse(path, Env({{"EMBODY_RESUME_FROM", "/a/step-1.ckpt"}}));
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_EQ(ctx->spec.kind, api::JobKind::kRl);
  EXPECT_EQ(ctx->spec_path, path);
  EXPECT_EQ(ctx->env.resume_from, "/a/step-1.ckpt");
}

TEST_F(JobContextTest, RefusesWhatTheEngineCannotRun) {
  auto missing = JobContext::Parse((dir_ / "none.json").string(), Env({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("cannot read spec: ", 0), 0u);

  auto invalid = JobContext::Parse(Write("bad.json", "{"), Env({}));
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.status().message().rfind("invalid spec ", 0), 0u);

  auto command = JobContext::Parse(Write("cmd.json", R"({"name": "c", "kind": "command",
          "resources": {"nodes": 1, "ranks_per_node": 1}, "command": ["true"]})"),
                                   Env({}));
  ASSERT_FALSE(command.ok());
  EXPECT_NE(command.status().message().find("spec kind is \"command\""), std::string::npos);
}

}  // namespace
}  // namespace engine
