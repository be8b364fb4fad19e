#include "agent/mpi_launch.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace agent {
namespace {

LaunchInput BaseInput(const std::string& kind) {
  LaunchInput in;
  in.job_id = 42;
  in.spec = {{"name", "t"}, {"kind", kind}};
  if (kind == "command") in.spec["command"] = {"python3", "train.py", "--epochs", "1"};
  in.hosts = {{1, "node-a", "127.0.0.1", 2}};
  in.local_address = "127.0.0.1";
  in.job_dir = "/data/jobs/job-42";
  in.checkpoint_dir = "/data/checkpoints/job-42";
  in.mpirun = "/usr/bin/mpirun";
  in.engine = "/opt/embody/bin/embody-engine";
  in.agent_url = "http://127.0.0.1:9999";
  in.job_token = "tok";
  return in;
}

std::vector<std::string> Prefix() {
  return {"/usr/bin/mpirun",
          "--hostfile",
          "/data/jobs/job-42/hostfile",
          "-np",
          "2",
          "--oversubscribe",
          "--output-filename",
          "/data/jobs/job-42/ranks:nojobid,nocopy",
          "-x",
          "EMBODY_AGENT_URL",
          "-x",
          "EMBODY_JOB_ID",
          "-x",
          "EMBODY_JOB_TOKEN",
          "-x",
          "EMBODY_CHECKPOINT_DIR"};
}

bool HasEnv(const LaunchPlan& p, const std::string& k, const std::string& v) {
  return std::find(p.env.begin(), p.env.end(), std::make_pair(k, v)) != p.env.end();
}

TEST(MpiLaunchTest, TrainRunsEngineWithSpec) {
  auto plan = BuildLaunchPlan(BaseInput("train"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto want = Prefix();
  want.insert(want.end(),
              {"/opt/embody/bin/embody-engine", "--spec", "/data/jobs/job-42/spec.json"});
  EXPECT_EQ(plan->argv, want);
  EXPECT_EQ(plan->hostfile, "127.0.0.1 slots=2\n");
  EXPECT_EQ(plan->hostfile_path, "/data/jobs/job-42/hostfile");
  EXPECT_EQ(plan->total_ranks, 2);
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_AGENT_URL", "http://127.0.0.1:9999"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_JOB_ID", "42"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_JOB_TOKEN", "tok"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_CHECKPOINT_DIR", "/data/checkpoints/job-42"));
  EXPECT_EQ(plan->env.size(), 4u);  // not root: no OMPI_ALLOW_RUN_AS_ROOT*
}

TEST(MpiLaunchTest, ResumeFromIsPassedToEveryRank) {
  LaunchInput in = BaseInput("train");
  in.resume_from = "/data/checkpoints/job-42/step-100.ckpt";
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_RESUME_FROM", in.resume_from));
  auto x = std::find(plan->argv.begin(), plan->argv.end(), "EMBODY_RESUME_FROM");
  ASSERT_NE(x, plan->argv.end());
  EXPECT_EQ(*(x - 1), "-x");
  EXPECT_LT(x - plan->argv.begin(),
            std::find(plan->argv.begin(), plan->argv.end(), "/opt/embody/bin/embody-engine") -
                plan->argv.begin());
}

TEST(MpiLaunchTest, CommandRunsArgvAndRootAddsOpenMpiVariables) {
  LaunchInput in = BaseInput("command");
  in.as_root = true;
  in.hosts = {{1, "a", "127.0.0.1", 1}, {2, "b", "127.0.0.1", 3}};
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto want = Prefix();
  want[4] = "4";
  want.insert(want.end(), {"python3", "train.py", "--epochs", "1"});
  EXPECT_EQ(plan->argv, want);
  EXPECT_EQ(plan->hostfile, "127.0.0.1 slots=4\n");
  EXPECT_TRUE(HasEnv(*plan, "OMPI_ALLOW_RUN_AS_ROOT", "1"));
  EXPECT_TRUE(HasEnv(*plan, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
  EXPECT_EQ(plan->env.size(), 6u);
}

TEST(MpiLaunchTest, RefusesRanksOnOtherHosts) {
  LaunchInput in = BaseInput("train");
  in.hosts.push_back({2, "node-b", "10.0.0.2", 1});
  auto plan = BuildLaunchPlan(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "launching ranks on other hosts is not available yet");
}

TEST(MpiLaunchTest, RejectsUnrunnableSpecs) {
  LaunchInput in = BaseInput("command");
  in.spec.erase("command");
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in.spec["command"] = nlohmann::json::array();
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in.spec["command"] = {"echo", 3};
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in = BaseInput("train");
  in.hosts.clear();
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in = BaseInput("train");
  in.hosts[0].ranks = 0;
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
}

TEST(MpiLaunchTest, MergeEnvironmentOverridesAndAppends) {
  auto env = MergeEnvironment({"PATH=/bin", "EMBODY_JOB_ID=1", "HOME=/root"},
                              {{"EMBODY_JOB_ID", "2"}, {"NEW", "x=y"}});
  EXPECT_EQ(env,
            (std::vector<std::string>{"PATH=/bin", "EMBODY_JOB_ID=2", "HOME=/root", "NEW=x=y"}));
}

}  // namespace
}  // namespace agent
