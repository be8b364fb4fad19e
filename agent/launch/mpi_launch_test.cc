#include "agent/launch/mpi_launch.h"

#include <stdlib.h>

#include <algorithm>
#include <map>

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
  in.rank_exec = "/opt/embody/bin/embody-agent";
  return in;
}

std::vector<std::string> Prefix() {
  return {"/usr/bin/mpirun",
          "--hostfile",
          "/data/jobs/job-42/hostfile",
          "-np",
          "2",
          "--oversubscribe",
          "--bind-to",
          "none",
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

// What follows the options: the agent's own words only; the job's argv is in command.json.
std::vector<std::string> RankExec(std::vector<std::string> extra = {}) {
  std::vector<std::string> v = {"--", "/opt/embody/bin/embody-agent", "exec-rank"};
  v.insert(v.end(), extra.begin(), extra.end());
  v.push_back("/data/jobs/job-42/command.json");
  return v;
}

std::vector<std::string> CommandArgv(const LaunchPlan& p) {
  auto j = nlohmann::json::parse(p.command);
  return j.at("argv").get<std::vector<std::string>>();
}

bool HasEnv(const LaunchPlan& p, const std::string& k, const std::string& v) {
  return std::find(p.env.begin(), p.env.end(), std::make_pair(k, v)) != p.env.end();
}

TEST(MpiLaunchTest, TrainRunsEngineWithSpec) {
  auto plan = BuildLaunchPlan(BaseInput("train"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto want = Prefix();
  auto tail = RankExec();
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(plan->argv, want);
  EXPECT_EQ(plan->command_path, "/data/jobs/job-42/command.json");
  EXPECT_EQ(CommandArgv(*plan), (std::vector<std::string>{"/opt/embody/bin/embody-engine",
                                                          "--spec",
                                                          "/data/jobs/job-42/spec.json"}));
  EXPECT_EQ(plan->hostfile, "127.0.0.1 slots=2\n");
  EXPECT_EQ(plan->hostfile_path, "/data/jobs/job-42/hostfile");
  EXPECT_EQ(plan->total_ranks, 2);
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_AGENT_URL", "http://127.0.0.1:9999"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_JOB_ID", "42"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_JOB_TOKEN", "tok"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_CHECKPOINT_DIR", "/data/checkpoints/job-42"));
  EXPECT_TRUE(HasEnv(*plan, "PATH", "/usr/local/bin:/usr/bin:/bin"));
  EXPECT_TRUE(HasEnv(*plan, "LANG", "C.UTF-8"));
  EXPECT_TRUE(HasEnv(*plan, "HOME", "/data/jobs/job-42"));
  EXPECT_TRUE(HasEnv(*plan, "TMPDIR", "/data/jobs/job-42/tmp"));
  // The whole environment: not root, no GPUs, no operator settings.
  EXPECT_EQ(plan->env.size(), 10u);
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
            std::find(plan->argv.begin(), plan->argv.end(), "--") - plan->argv.begin());
}

TEST(MpiLaunchTest, CommandRunsArgvAndRootAddsOpenMpiVariables) {
  LaunchInput in = BaseInput("command");
  in.as_root = true;
  in.hosts = {{1, "a", "127.0.0.1", 1}, {2, "b", "127.0.0.1", 3}};
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto want = Prefix();
  want[4] = "4";
  auto tail = RankExec();
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(plan->argv, want);
  EXPECT_EQ(CommandArgv(*plan), (std::vector<std::string>{"python3", "train.py", "--epochs", "1"}));
  EXPECT_EQ(plan->hostfile, "127.0.0.1 slots=4\n");
  EXPECT_TRUE(HasEnv(*plan, "OMPI_ALLOW_RUN_AS_ROOT", "1"));
  EXPECT_TRUE(HasEnv(*plan, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
  EXPECT_EQ(plan->env.size(), 12u);
}

// "launcher": "direct": the agent binary forks the node's ranks in mpirun's place; the command
// file and the environment are those of an mpirun launch.
TEST(MpiLaunchTest, DirectLauncherStartsTheRanksWithoutMpirun) {
  LaunchInput in = BaseInput("command");
  in.spec["launcher"] = "direct";
  in.address_space_bytes = 1 << 30;
  in.kill_grace_s = 7;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->argv, (std::vector<std::string>{
                            "/opt/embody/bin/embody-agent", "launch-ranks", "--ranks", "2",
                            "--output", "/data/jobs/job-42/ranks", "--grace-s", "7",
                            "--address-space", "1073741824", "/data/jobs/job-42/command.json"}));
  EXPECT_EQ(CommandArgv(*plan), (std::vector<std::string>{"python3", "train.py", "--epochs", "1"}));
  in.spec["launcher"] = "mpirun";
  auto mpirun = BuildLaunchPlan(in);
  ASSERT_TRUE(mpirun.ok());
  EXPECT_EQ(plan->env, mpirun->env);
  EXPECT_EQ(plan->command, mpirun->command);
  // Ranks on another node need mpirun's daemons.
  in.spec["launcher"] = "direct";
  in.hosts = {{1, "a", "127.0.0.1", 1, "http://127.0.0.1:1"}, {2, "b", "127.0.0.2", 1, "http://127.0.0.2:1"}};
  EXPECT_EQ(BuildLaunchPlan(in).status().code(), common::Code::kInvalidArgument);
}

TEST(MpiLaunchTest, ArgvThatLooksLikeMpirunOptionsNeverReachesMpirun) {
  LaunchInput in = BaseInput("command");
  std::vector<std::string> hostile = {"--allow-run-as-root", "-x", "LD_PRELOAD=/tmp/evil.so",
                                      ":",  "-np", "64", "--host", "10.9.9.9", "evil"};
  in.spec["command"] = hostile;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto want = Prefix();
  auto tail = RankExec();
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(plan->argv, want);
  auto prefix = Prefix();
  for (const auto& word : hostile) {
    if (std::count(prefix.begin(), prefix.end(), word)) continue;  // "-x", "-np": the agent's
    EXPECT_EQ(std::count(plan->argv.begin(), plan->argv.end(), word), 0) << word;
  }
  EXPECT_EQ(CommandArgv(*plan), hostile);
}

TEST(MpiLaunchTest, EnvironmentIsBuiltFromNothingButTheJobsOwn) {
  // Whatever the agent's environment holds (its token, its HOME, LD_PRELOAD) is not an input.
  ::setenv("EMBODY_AGENT_SECRET_MARKER", "agent-token-4f1c", 1);
  LaunchInput in = BaseInput("train");
  in.mpi_settings = OpenMpiSettings({"OMPI_MCA_btl=self,vader", "PMIX_MCA_gds=hash",
                                     "EMBODY_TOKEN=agent-token-4f1c", "HOME=/root",
                                     "LD_PRELOAD=/x.so", "OMPI_ALLOW_RUN_AS_ROOT=1"});
  in.cuda_visible_devices = "1,3";
  in.address_space_bytes = 1 << 30;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ::unsetenv("EMBODY_AGENT_SECRET_MARKER");
  std::vector<std::string> keys;
  for (const auto& [k, v] : plan->env) {
    keys.push_back(k);
    EXPECT_EQ(v.find("agent-token-4f1c"), std::string::npos) << k;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"PATH", "LANG", "HOME", "TMPDIR", "EMBODY_AGENT_URL",
                                            "EMBODY_JOB_ID", "EMBODY_JOB_TOKEN",
                                            "EMBODY_CHECKPOINT_DIR", "EMBODY_NODE_ADDRESS",
                                            "CUDA_DEVICE_ORDER",
                                            "CUDA_VISIBLE_DEVICES", "OMPI_MCA_odls_base_sigkill_timeout", "OMPI_MCA_btl",
                                            "PMIX_MCA_gds"}));
  EXPECT_TRUE(HasEnv(*plan, "CUDA_VISIBLE_DEVICES", "1,3"));
  EXPECT_TRUE(HasEnv(*plan, "CUDA_DEVICE_ORDER", "PCI_BUS_ID"));
  for (const auto& a : plan->argv) EXPECT_EQ(a.find("agent-token-4f1c"), std::string::npos) << a;
  EXPECT_EQ(plan->command.find("agent-token-4f1c"), std::string::npos);
  // The per-rank memory limit goes to exec-rank, in the agent's part of the command line.
  auto want = Prefix();
  auto tail = RankExec({"--address-space", std::to_string(1 << 30)});
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(plan->argv, want);
  // A cpu job on a GPU node sees no GPU at all.
  in.cuda_visible_devices = "";
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(HasEnv(*plan, "CUDA_VISIBLE_DEVICES", ""));
}

TEST(MpiLaunchTest, OpenMpiWaitsTheGraceBeforeSigkillOnlyWhenOtherRanksMayStillRun) {
  LaunchInput in = BaseInput("train");
  in.kill_grace_s = 7;
  auto plan = BuildLaunchPlan(in);  // 2 ranks: when one dies, the other still gets its grace
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(HasEnv(*plan, "OMPI_MCA_odls_base_sigkill_timeout", "7"));
  in.hosts = {{1, "node-a", "127.0.0.1", 1}};
  plan = BuildLaunchPlan(in);  // 1 rank: once it has exited there is nobody to wait for
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(HasEnv(*plan, "OMPI_MCA_odls_base_sigkill_timeout", "0"));
}

// Ranks on other hosts: every host in the hostfile, mpirun's rsh launcher pointed at
// `embody-agent rsh` with the map of the other hosts' agents, and exec-rank reading the command
// file of whichever node it runs on.
TEST(MpiLaunchTest, OtherHostsAreReachedThroughTheirAgents) {
  LaunchInput in = BaseInput("train");
  in.hosts.push_back({2, "node-b", "10.0.0.2", 3, "http://10.0.0.2:7002"});
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->total_ranks, 5);
  EXPECT_EQ(plan->hostfile, "127.0.0.1 slots=2\n10.0.0.2 slots=3\n");
  EXPECT_EQ(plan->rsh_hosts_path, "/data/jobs/job-42/rsh-hosts.json");
  EXPECT_EQ(nlohmann::json::parse(plan->rsh_hosts),
            (nlohmann::json{{"10.0.0.2", "http://10.0.0.2:7002"}}));
  auto at = [&](const std::string& word) {
    return std::find(plan->argv.begin(), plan->argv.end(), word) - plan->argv.begin();
  };
  const auto agent = at("plm_rsh_agent");
  ASSERT_LT(agent + 1, static_cast<long>(plan->argv.size()));
  EXPECT_EQ(plan->argv[agent - 1], "--mca");
  EXPECT_EQ(plan->argv[agent + 1],
            "/opt/embody/bin/embody-agent rsh --hosts /data/jobs/job-42/rsh-hosts.json");
  EXPECT_EQ(plan->argv[at("plm_rsh_no_tree_spawn") + 1], "1");
  EXPECT_LT(agent, at("--"));  // launcher options, before the program
  EXPECT_EQ(plan->argv.back(), "command.json");
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_NODE_ADDRESS", "127.0.0.1"));
  // Each rank writes its output in its own node's job directory: Open MPI would hand the head's
  // --output-filename path to every daemon.
  EXPECT_EQ(at("--output-filename"), static_cast<long>(plan->argv.size()));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_RANK_LOG_DIR", "/data/jobs/job-42/ranks"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_JOB_DIR", "/data/jobs/job-42"));
  // One node alone: no rsh launcher, and the command file by its full path.
  in.hosts.pop_back();
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->rsh_hosts.empty());
  EXPECT_EQ(at("plm_rsh_agent"), static_cast<long>(plan->argv.size()));
  EXPECT_EQ(plan->argv.back(), "/data/jobs/job-42/command.json");
  EXPECT_LT(at("--output-filename"), at("--"));
  EXPECT_FALSE(HasEnv(*plan, "EMBODY_RANK_LOG_DIR", "/data/jobs/job-42/ranks"));
}

// Agents that serve TLS: the launcher verifies the other agents' https URLs with the node's CA
// file, and the ranks (whose reports go to this agent's https API) get it as EMBODY_CA_FILE.
TEST(MpiLaunchTest, TheCaFileReachesTheLauncherAndTheRanks) {
  LaunchInput in = BaseInput("train");
  in.agent_url = "https://127.0.0.1:7001";
  in.ca_file = "/etc/embody/ca.pem";
  in.hosts.push_back({2, "node-b", "10.0.0.2", 3, "https://10.0.0.2:7002"});
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto at = [&](const std::string& word) {
    return std::find(plan->argv.begin(), plan->argv.end(), word) - plan->argv.begin();
  };
  EXPECT_EQ(plan->argv[at("plm_rsh_agent") + 1],
            "/opt/embody/bin/embody-agent rsh --hosts /data/jobs/job-42/rsh-hosts.json "
            "--ca-file /etc/embody/ca.pem");
  EXPECT_EQ(nlohmann::json::parse(plan->rsh_hosts),
            (nlohmann::json{{"10.0.0.2", "https://10.0.0.2:7002"}}));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_CA_FILE", "/etc/embody/ca.pem"));
  EXPECT_TRUE(HasEnv(*plan, "EMBODY_AGENT_URL", "https://127.0.0.1:7001"));
  const auto forwarded = at("EMBODY_CA_FILE");
  ASSERT_LT(forwarded, at("--"));
  EXPECT_EQ(plan->argv[forwarded - 1], "-x");
  // The launcher's command line is split on whitespace.
  in.ca_file = "/etc/my ca.pem";
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  // Without a CA file, neither.
  in.ca_file = "";
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->argv[at("plm_rsh_agent") + 1].find("--ca-file"), std::string::npos);
  EXPECT_EQ(at("EMBODY_CA_FILE"), static_cast<long>(plan->argv.size()));
  for (const auto& [k, v] : plan->env) EXPECT_NE(k, "EMBODY_CA_FILE");
}

// A command job's ranks get torch.distributed's rendezvous on the head node (forwarded to the other
// nodes) and, on every node, that node's copy of the SDK on PYTHONPATH.
TEST(MpiLaunchTest, ACommandJobGetsTheRendezvousAndTheSdk) {
  LaunchInput in = BaseInput("command");
  in.hosts = {{1, "node-a", "10.0.0.1", 1, "http://10.0.0.1:1"},
              {2, "node-b", "10.0.0.2", 1, "http://10.0.0.2:1"}};
  in.local_address = "10.0.0.1";
  in.master_port = 29517;
  in.python_sdk = "/opt/embody/share/embody/python";
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(HasEnv(*plan, "MASTER_ADDR", "10.0.0.1"));
  EXPECT_TRUE(HasEnv(*plan, "MASTER_PORT", "29517"));
  EXPECT_TRUE(HasEnv(*plan, "PYTHONPATH", "/opt/embody/share/embody/python"));
  int forwarded = 0;
  for (size_t i = 0; i + 1 < plan->argv.size(); ++i) {
    if (plan->argv[i] != "-x") continue;
    forwarded += plan->argv[i + 1] == "MASTER_ADDR" || plan->argv[i + 1] == "MASTER_PORT";
    EXPECT_NE(plan->argv[i + 1], "PYTHONPATH");  // each node's own
  }
  EXPECT_EQ(forwarded, 2);
  // No port: no rendezvous (an engine job, or none could be had).
  in.master_port = 0;
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  for (const auto& [k, v] : plan->env) EXPECT_NE(k, "MASTER_PORT");
  // The other node's daemon puts its own copy on its ranks' path.
  LaunchInput here = BaseInput("command");
  here.python_sdk = "/srv/embody/python";
  auto daemon = BuildDaemonPlan(here, "/usr/bin/orted", {"-mca", "ess", "env"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  bool has = false;
  for (const auto& [k, v] : daemon->env) has |= k == "PYTHONPATH" && v == "/srv/embody/python";
  EXPECT_TRUE(has);
}

// The store wait (agent/launch/rendezvous_wait.h) is named in every node's command file for a
// default-launcher command job, and for nothing else: torchrun waits in embody.torchrun, an image
// cannot load a library of the node's, and engine jobs have no torch.distributed store.
TEST(MpiLaunchTest, TheStoreWaitIsNamedForDefaultLauncherCommandJobsOnly) {
  const std::string lib = "/opt/embody/bin/libembody-rendezvous-wait.so";
  auto wait_of = [](const std::string& command) {
    nlohmann::json c = nlohmann::json::parse(command);
    return c.value("rendezvous_wait", std::string());
  };
  LaunchInput in = BaseInput("command");
  in.master_port = 29517;
  in.rendezvous_wait = lib;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(wait_of(plan->command), lib);
  for (const auto& [k, v] : plan->env) EXPECT_NE(k, "LD_PRELOAD");  // exec-rank's, per rank
  auto daemon = BuildDaemonPlan(in, "/usr/bin/orted", {"-mca", "ess", "env"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_EQ(wait_of(daemon->command), lib);

  in.rendezvous_wait.clear();  // not built or installed: ranks start as before
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(wait_of(plan->command), "");

  in.rendezvous_wait = lib;
  in.spec["launcher"] = "torchrun";
  in.spec["resources"] = {{"nodes", 1}, {"ranks_per_node", 1}};
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(wait_of(plan->command), "");

  LaunchInput image = BaseInput("command");
  image.rendezvous_wait = lib;
  image.container = ContainerPlan{};
  image.container->rootfs = "/data/images/eee/rootfs";
  image.container->init = "/data/bin/embody-container-init";
  plan = BuildLaunchPlan(image);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(wait_of(plan->command), "");

  LaunchInput train = BaseInput("train");
  train.rendezvous_wait = lib;
  plan = BuildLaunchPlan(train);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(wait_of(plan->command), "");
}

// "environment": {"python": DIR}: the venv's bin/ first on PATH and VIRTUAL_ENV, on the head's
// ranks and on every other node's (whose daemon the ranks inherit it from).
TEST(MpiLaunchTest, AVirtualenvComesFirstOnEveryRanksPath) {
  LaunchInput in = BaseInput("command");
  in.spec["environment"] = {{"python", "/srv/venvs/bc"}};
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(HasEnv(*plan, "PATH", "/srv/venvs/bc/bin:/usr/local/bin:/usr/bin:/bin"));
  EXPECT_TRUE(HasEnv(*plan, "VIRTUAL_ENV", "/srv/venvs/bc"));
  auto daemon = BuildDaemonPlan(in, "/usr/bin/orted", {"-mca", "ess", "env"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::map<std::string, std::string> env(daemon->env.begin(), daemon->env.end());
  EXPECT_EQ(env["PATH"], "/srv/venvs/bc/bin:/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(env["VIRTUAL_ENV"], "/srv/venvs/bc");
  EXPECT_EQ(*PythonEnvironmentOf(in.spec), "/srv/venvs/bc");
  // Without one, the node's PATH alone.
  in.spec.erase("environment");
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  for (const auto& [k, v] : plan->env) EXPECT_NE(k, "VIRTUAL_ENV");
  EXPECT_EQ(*PythonEnvironmentOf(in.spec), "");
  // A path the server would have refused is refused here too.
  for (const nlohmann::json& bad : {nlohmann::json{{"python", "/srv/../root/venv"}},
                                    nlohmann::json{{"python", "venv"}},
                                    nlohmann::json{{"image", "x"}}, nlohmann::json("/srv/v")}) {
    in.spec["environment"] = bad;
    EXPECT_FALSE(BuildLaunchPlan(in).ok()) << bad.dump();
    EXPECT_FALSE(BuildDaemonPlan(in, "/usr/bin/orted", {}).ok()) << bad.dump();
  }
}

TEST(MpiLaunchTest, AnImageJobsRanksRunInItsContainerWithTheJobsPathsBound) {
  LaunchInput in = BaseInput("command");
  in.spec = {{"kind", "command"},
             {"command", {"python3", "train.py"}},
             {"datasets", {{"lift@2", "/srv/datasets/tenant-1/dataset-7"}}},
             {"environment",
              {{"image",
                {{"name", "torch@1"},
                 {"path", "/srv/datasets/tenant-1/dataset-3"},
                 {"digest", "sha256:" + std::string(64, 'e')}}}}}};
  in.python_sdk = "/opt/embody/share/embody/python";
  in.resume_from = "/data/downloads/job-1/step-5.ckpt";
  auto image = ImageOf(in.spec);
  ASSERT_TRUE(image.ok() && *image) << image.status().message();
  EXPECT_EQ((*image)->path, "/srv/datasets/tenant-1/dataset-3");
  ContainerPlan container;
  container.rootfs = "/data/images/eee/rootfs";
  container.init = "/data/bin/embody-container-init";
  in.container = container;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const nlohmann::json command = nlohmann::json::parse(plan->command);
  EXPECT_EQ(command["argv"], nlohmann::json({"python3", "train.py"}));
  auto parsed = ParseContainerPlan(command["container"]);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->rootfs, "/data/images/eee/rootfs");
  std::vector<std::pair<std::string, bool>> binds;
  for (const auto& b : parsed->binds) binds.push_back({b.path, b.read_only});
  EXPECT_EQ(binds, (std::vector<std::pair<std::string, bool>>{
                       {in.job_dir, false},
                       {in.checkpoint_dir, false},
                       {"/opt/embody/share/embody/python", true},
                       {"/data/downloads/job-1", true},
                       {"/srv/datasets/tenant-1/dataset-7", true}}));
  // Not bound by the server (a name where the binding belongs): refused.
  in.spec["environment"]["image"] = "torch";
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in.spec["environment"]["image"] = {{"name", "torch@1"}, {"path", "/x/../y"},
                                     {"digest", "sha256:" + std::string(64, 'e')}};
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
}

TEST(MpiLaunchTest, ACommandJobsBoundDatasetsReachEveryRank) {
  LaunchInput in = BaseInput("command");
  in.hosts = {{1, "node-a", "10.0.0.1", 1, "http://10.0.0.1:1"},
              {2, "node-b", "10.0.0.2", 1, "http://10.0.0.2:1"}};
  in.local_address = "10.0.0.1";
  const nlohmann::json bound = {{"lift@2", "/data/datasets/tenant-1/dataset-7"},
                                {"can@1", "/data/datasets/tenant-1/dataset-3"}};
  in.spec["datasets"] = bound;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::map<std::string, std::string> env(plan->env.begin(), plan->env.end());
  ASSERT_EQ(env.count("EMBODY_DATASETS"), 1u);
  EXPECT_EQ(nlohmann::json::parse(env["EMBODY_DATASETS"]), bound);
  bool forwarded = false;
  for (size_t i = 0; i + 1 < plan->argv.size(); ++i) {
    forwarded |= plan->argv[i] == "-x" && plan->argv[i + 1] == "EMBODY_DATASETS";
  }
  EXPECT_TRUE(forwarded);
  // Only the server's shape is passed on.
  for (const nlohmann::json& bad :
       {nlohmann::json{"dataset:lift"}, nlohmann::json{{"lift", "/d"}},
        nlohmann::json{{"lift@x", "/d"}}, nlohmann::json{{"li ft@1", "/d"}},
        nlohmann::json{{"lift@1", "relative"}}, nlohmann::json{{"lift@1", "/a/../b"}},
        nlohmann::json{{"lift@1", 3}}}) {
    in.spec["datasets"] = bad;
    EXPECT_EQ(BuildLaunchPlan(in).status().field(), "datasets") << bad.dump();
  }
  // None bound: no variable (the SDK then says none is).
  in.spec.erase("datasets");
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  for (const auto& [k, v] : plan->env) EXPECT_NE(k, "EMBODY_DATASETS");
}

TEST(MpiLaunchTest, TorchrunStartsOneProcessPerNodeWithTheNodesWorkers) {
  LaunchInput in = BaseInput("command");
  in.spec["launcher"] = "torchrun";
  in.spec["command"] = {"train.py", "--epochs", "1"};
  in.spec["resources"] = {{"nodes", 2}, {"ranks_per_node", 4}};
  in.hosts = {{1, "node-a", "10.0.0.1", 4, "http://10.0.0.1:1"},
              {2, "node-b", "10.0.0.2", 4, "http://10.0.0.2:1"}};
  in.local_address = "10.0.0.1";
  in.master_port = 29517;
  in.python_sdk = "/opt/embody/share/embody/python";
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->hostfile, "10.0.0.1 slots=1\n10.0.0.2 slots=1\n");
  EXPECT_EQ(plan->total_ranks, 2);  // processes (and rank logs): one per node
  auto at = [&](const std::string& word) {
    return std::find(plan->argv.begin(), plan->argv.end(), word) - plan->argv.begin();
  };
  EXPECT_EQ(plan->argv[at("-np") + 1], "2");
  const std::vector<std::string> torchrun = {
      "python3", "-m", "embody.torchrun", "--nnodes", "2", "--nproc_per_node", "4",
      "--rdzv_backend", "static", "--max_restarts", "0", "train.py", "--epochs", "1"};
  EXPECT_EQ(CommandArgv(*plan), torchrun);
  EXPECT_EQ(nlohmann::json::parse(plan->command)["launcher"], "torchrun");
  EXPECT_TRUE(HasEnv(*plan, "MASTER_PORT", "29517"));
  EXPECT_TRUE(HasEnv(*plan, "OMPI_MCA_odls_base_sigkill_timeout", "5"));
  // The other node writes the same command file from its own copy of the spec.
  LaunchInput there = in;
  there.local_address = "10.0.0.2";
  auto daemon = BuildDaemonPlan(there, "/usr/bin/orted", {});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_EQ(daemon->command, plan->command);
  // One node: still its torchrun alone, with the grace for its workers.
  in.spec["resources"] = {{"nodes", 1}, {"ranks_per_node", 2}};
  in.hosts = {{1, "node-a", "10.0.0.1", 2}};
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->hostfile, "10.0.0.1 slots=1\n");
  EXPECT_EQ(CommandArgv(*plan)[6], "2");
  EXPECT_TRUE(HasEnv(*plan, "OMPI_MCA_odls_base_sigkill_timeout", "5"));
  // Without the SDK, torch's own torchrun.
  in.python_sdk.clear();
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(CommandArgv(*plan)[2], "torch.distributed.run");
  // The mpirun launcher's command file names no launcher (exec-rank sets RANK, ... itself).
  in.spec.erase("launcher");
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(nlohmann::json::parse(plan->command).contains("launcher"));
  EXPECT_EQ(CommandArgv(*plan)[0], "train.py");
}

TEST(MpiLaunchTest, RefusesHostsItCannotReachOrWrite) {
  auto with = [](api::HostSlot extra) {
    LaunchInput in = BaseInput("train");
    in.hosts.push_back(std::move(extra));
    return BuildLaunchPlan(in);
  };
  EXPECT_FALSE(with({2, "b", "10.0.0.2", 1, ""}).ok());                  // no agent URL
  EXPECT_FALSE(with({2, "b", "10.0.0.2", 1, "file:///etc/passwd"}).ok());
  EXPECT_FALSE(with({2, "b", "10.0.0.2", 1, "http://x y"}).ok());
  EXPECT_FALSE(with({2, "b", "10.0.0.2\nevil slots=99", 1, "http://b"}).ok());  // hostfile line
  EXPECT_FALSE(with({2, "b", "10.0.0.2 slots=9", 1, "http://b"}).ok());
  EXPECT_FALSE(with({2, "b", "-x", 1, "http://b"}).ok());
  // A second node at this node's address is this machine: its ranks run here, no rsh.
  auto same_machine = with({2, "b", "127.0.0.1", 3, ""});
  ASSERT_TRUE(same_machine.ok()) << same_machine.status().ToString();
  EXPECT_EQ(same_machine->hostfile, "127.0.0.1 slots=5\n");
  EXPECT_TRUE(same_machine->rsh_hosts.empty());
  {
    LaunchInput two = BaseInput("train");
    two.hosts.push_back({2, "b", "10.0.0.2", 1, "http://b:1"});
    two.hosts.push_back({3, "c", "10.0.0.2", 1, "http://c:1"});
    EXPECT_FALSE(BuildLaunchPlan(two).ok());  // which agent would start its daemon?
  }
  EXPECT_FALSE(with({2, "b", "10.0.0.2", 0, "http://b"}).ok());
  EXPECT_TRUE(with({2, "b", "10.0.0.2", 1, "http://b:1"}).ok());
  // The head must be this node.
  LaunchInput in = BaseInput("train");
  in.hosts = {{2, "b", "10.0.0.2", 1, "http://b:1"}, {1, "node-a", "127.0.0.1", 2}};
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  // mpirun splits its rsh agent string on whitespace.
  in = BaseInput("train");
  in.hosts.push_back({2, "b", "10.0.0.2", 1, "http://b:1"});
  in.job_dir = "/data dir/jobs/job-42";
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
}

// The daemon on a node that is not the head: this node's engine and job directory, a clean
// environment with this node's address, and Open MPI told it may run as root only when it must.
TEST(MpiLaunchTest, DaemonPlanIsThisNodesOwn) {
  LaunchInput in = BaseInput("train");
  in.job_dir = "/other/jobs/job-42";
  in.checkpoint_dir = "/other/checkpoints/job-42";
  in.local_address = "10.0.0.2";
  in.mpi_settings = {{"OMPI_MCA_btl", "self,tcp"}};
  auto plan = BuildDaemonPlan(in, "/usr/bin/orted", {"-mca", "ess", "env"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->argv, (std::vector<std::string>{"/usr/bin/orted", "-mca", "ess", "env"}));
  EXPECT_EQ(plan->command_path, "/other/jobs/job-42/command.json");
  EXPECT_EQ(nlohmann::json::parse(plan->command)["argv"],
            (nlohmann::json{"/opt/embody/bin/embody-engine", "--spec",
                            "/other/jobs/job-42/spec.json"}));
  std::map<std::string, std::string> env(plan->env.begin(), plan->env.end());
  EXPECT_EQ(env["HOME"], "/other/jobs/job-42");
  EXPECT_EQ(env["TMPDIR"], "/other/jobs/job-42/tmp");
  EXPECT_EQ(env["EMBODY_NODE_ADDRESS"], "10.0.0.2");
  EXPECT_EQ(env["OMPI_MCA_btl"], "self,tcp");
  EXPECT_EQ(env.count("EMBODY_JOB_TOKEN"), 0u);  // the head's -x hands the ranks the token
  EXPECT_EQ(env.count("OMPI_ALLOW_RUN_AS_ROOT"), 0u);
  in.as_root = true;
  plan = BuildDaemonPlan(in, "/usr/bin/orted", {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(HasEnv(LaunchPlan{.env = plan->env}, "OMPI_ALLOW_RUN_AS_ROOT", "1"));
  in.spec["kind"] = "import";
  EXPECT_FALSE(BuildDaemonPlan(in, "/usr/bin/orted", {}).ok());
  EXPECT_EQ(DaemonBinary("/usr/bin/mpirun", "orted"), "/usr/bin/orted");
  EXPECT_EQ(DaemonBinary("mpirun", "prted"), "prted");
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

TEST(MpiLaunchTest, EnvironmentStringsForExec) {
  EXPECT_EQ(EnvironmentStrings({{"A", "1"}, {"B", "x=y"}, {"C", ""}}),
            (std::vector<std::string>{"A=1", "B=x=y", "C="}));
}

}  // namespace
}  // namespace agent
