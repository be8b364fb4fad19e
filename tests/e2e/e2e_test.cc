// End to end: PostgreSQL + embody-server + two agents, all real processes on loopback; jobs go
// in over HTTP exactly as a user would send them.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/time_util.h"
#include "engine/testing/reach_hdf5.h"
#include "storage/manifest.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

class EndToEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_ = new LocalStack(2, 1);
    // Running jobs against their plan, on a cluster description that promises 1,000 times this
    // machine's compute: every train job falls far short of it and is flagged.
    std::ifstream in(std::string(EMBODY_SOURCE_DIR) + "/docs/plan/this-machine.json");
    json cluster = json::parse(in);
    cluster["name"] = "over-promised";
    cluster["compute"]["flops_per_s"] = cluster["compute"]["flops_per_s"].get<double>() * 1000;
    cluster["compute"]["memory_gbps"] = cluster["compute"]["memory_gbps"].get<double>() * 1000;
    cluster["reader_samples_per_s"] = cluster["reader_samples_per_s"].get<double>() * 1000;
    cluster["step_overhead_ms"] = 0;
    const std::string cluster_file = stack_->dir() + "/plan-cluster.json";
    std::ofstream(cluster_file) << cluster.dump();
    stack_->AddServerFlags({"--plan-cluster", cluster_file, "--plan-deviation-steps", "3"});
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  static int64_t Submit(const json& spec) { return stack_->SubmitJob(spec); }
  static LocalStack* stack_;
};

LocalStack* EndToEndTest::stack_ = nullptr;

TEST_F(EndToEndTest, TwoRankTrainingJobSucceedsWithEventsLogsAndCheckpoint) {
  json spec = {{"name", "e2e-train"},
               {"kind", "train"},
               {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
               {"engine",
                {{"optim", {{"steps", 120}, {"lr", 0.004}, {"warmup_steps", 10}}},
                 {"data", {{"rows_per_step", 2}, {"tokens_per_row", 512}}},
                 {"model",
                  {{"d_model", 48},
                   {"layers", 2},
                   {"heads", 4},
                   {"mlp", 96},
                   {"action_horizon", 4}}}}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["allocation"].size(), 2u) << "the job spans both nodes";
  EXPECT_EQ(job["exit_code"], 0);

  // Step events: every step reported, loss falling.
  HttpResult ev = stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=step&limit=1000");
  ASSERT_EQ(ev.status, 200) << ev.text;
  const json& steps = ev.body["events"];
  ASSERT_GE(steps.size(), 100u) << ev.text.substr(0, 500);
  // The flow-matching loss is noisy step to step (random t and noise): compare means of 10.
  auto mean_loss = [&](size_t begin, size_t end) {
    double s = 0.0;
    for (size_t i = begin; i < end; ++i) s += steps[i]["data"]["loss"].get<double>();
    return s / static_cast<double>(end - begin);
  };
  const double first = mean_loss(0, 10), last = mean_loss(steps.size() - 10, steps.size());
  EXPECT_LT(last, 0.7 * first) << "mean loss of the first 10 steps " << first
                               << ", of the last 10 " << last;
  const json& d = steps.back()["data"];
  EXPECT_GT(d["tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(d["world_size"], 2);
  EXPECT_GT(d["packing_efficiency"].get<double>(), 0.0);
  EXPECT_TRUE(d.contains("padding_ratio") && d.contains("allreduce_seconds") && d.contains("mfu"))
      << d.dump();

  // Every step carries the plan's step time (--plan-cluster), and the job, far slower than the
  // over-promised cluster, is flagged once, by the server, with a metric.
  for (const json& s : steps) {
    ASSERT_TRUE(s["data"].contains("predicted_step_seconds")) << s.dump();
    EXPECT_GT(s["data"]["predicted_step_seconds"].get<double>(), 0.0);
  }
  HttpResult dev =
      stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=plan_deviation");
  ASSERT_EQ(dev.status, 200) << dev.text;
  ASSERT_EQ(dev.body["events"].size(), 1u) << dev.text;
  const json& flag = dev.body["events"][0]["data"];
  EXPECT_GT(flag["ratio"].get<double>(), 1.5) << flag.dump();
  EXPECT_EQ(flag["cluster"], "over-promised");
  EXPECT_EQ(flag["ranks"], 2);
  HttpResult metrics = stack_->Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string series_line = "\nembody_plan_deviations_total ";
  const size_t at = metrics.text.find(series_line);
  ASSERT_NE(at, std::string::npos) << metrics.text.substr(0, 2000);
  EXPECT_GE(std::stod(metrics.text.substr(at + series_line.size())), 1.0);
  // The step-time chart's series: measured and predicted side by side.
  HttpResult series = stack_->Get("/v1/jobs/" + std::to_string(id) + "/metrics");
  ASSERT_EQ(series.status, 200) << series.text.substr(0, 300);
  EXPECT_TRUE(series.body["series"].contains("predicted_step_seconds")) << series.text.substr(0, 500);

  // The closing evaluation: sampled actions closer to the expert's than predicting zeros.
  HttpResult eval = stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=eval");
  ASSERT_EQ(eval.status, 200) << eval.text;
  ASSERT_EQ(eval.body["events"].size(), 1u) << eval.text;
  const json& e = eval.body["events"][0]["data"];
  EXPECT_LT(e["action_mse"].get<double>(), e["zero_action_mse"].get<double>()) << e.dump();

  // State transitions are events too.
  HttpResult st = stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=state");
  ASSERT_EQ(st.status, 200);
  std::vector<std::string> to;
  for (const auto& e : st.body["events"]) to.push_back(e["data"]["to"]);
  EXPECT_NE(std::find(to.begin(), to.end(), "SCHEDULED"), to.end());
  EXPECT_NE(std::find(to.begin(), to.end(), "RUNNING"), to.end());
  EXPECT_EQ(to.back(), "SUCCEEDED");

  // Logs of both ranks reach the server.
  for (int rank : {0, 1}) {
    HttpResult logs = stack_->Get("/v1/jobs/" + std::to_string(id) +
                                  "/logs?rank=" + std::to_string(rank));
    ASSERT_EQ(logs.status, 200);
    EXPECT_FALSE(logs.text.empty()) << "rank " << rank << " has no log";
  }

  // The final checkpoint exists where the job says it is.
  ASSERT_TRUE(job["latest_checkpoint"].is_object()) << job.dump(2);
  std::string path = job["latest_checkpoint"]["path"];
  EXPECT_EQ(job["latest_checkpoint"]["step"], 120);
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_GT(std::filesystem::file_size(path), 0u);
}

// A tenant of the stack with a member token of its own.
struct StackTenant {
  int64_t id = 0;
  std::string token;
};
StackTenant MakeTenant(LocalStack* stack, const std::string& name) {
  StackTenant t;
  HttpResult created =
      stack->Post("/v1/tenants", json{{"name", name + "-" + std::to_string(::getpid())}}.dump());
  EXPECT_EQ(created.status, 201) << created.text;
  if (created.status != 201) return t;
  HttpResult member = stack->Post(
      "/v1/tokens",
      json{{"tenant_id", created.body["id"]}, {"role", "member"}, {"name", name}}.dump());
  EXPECT_EQ(member.status, 201) << member.text;
  t.id = created.body["id"].get<int64_t>();
  t.token = member.body.value("token", "");
  return t;
}

// The agents' default --tenant-gid-base: every process of tenant T's jobs has group base + T.
constexpr gid_t kTenantGidBase = 10000000;

// A robomimic-layout HDF5 file made here, imported through storage's importer (what
// `embody-data import-hdf5` runs) and laid out as agents publish a version
// (agent/data/dataset_import.h): <dir>/tenant-<tid>/dataset, the tenant directory root:<tenant gid>
// 0750 and what is in it readable by all, so only that tenant's jobs can read it. Where the test
// (and so the agents) is not root, jobs run as the agents, that is as this process, and the
// group changes nothing.
std::string MakeTenantDataset(const std::string& name, int64_t tenant_id) {
  namespace fs = std::filesystem;
  const std::string dir = storage::testing::MakeTempDir("e2e_dataset_" + name);
  EXPECT_FALSE(dir.empty());
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const std::string tenant_dir = dir + "/tenant-" + std::to_string(tenant_id);
  fs::create_directory(tenant_dir);
  auto made = engine::testing::MakeReachDataset(tenant_dir, engine::testing::ReachHdf5Spec{});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  for (const auto& entry : fs::recursive_directory_iterator(tenant_dir)) {
    fs::permissions(entry.path(),
                    fs::perms::group_read | fs::perms::others_read |
                        (entry.is_directory() ? fs::perms::group_exec | fs::perms::others_exec
                                              : fs::perms::none),
                    fs::perm_options::add);
  }
  if (::geteuid() == 0) {
    EXPECT_EQ(::chown(tenant_dir.c_str(), 0, kTenantGidBase + static_cast<gid_t>(tenant_id)), 0);
  }
  fs::permissions(tenant_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  return made.ok() ? *made : "";
}

// The directory MakeTenantDataset made for `dataset`, to remove.
std::string DatasetBase(const std::string& dataset) {
  return std::filesystem::path(dataset).parent_path().parent_path().string();
}

json DatasetJob(const std::string& name, const std::string& dataset) {
  return {{"name", name},
          {"kind", "train"},
          {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
          {"engine",
           {{"optim", {{"steps", 120}, {"lr", 0.003}, {"warmup_steps", 10}}},
            {"data",
             {{"dataset", "dir:" + dataset},
              {"language", "reach the red blob"},
              {"rows_per_step", 2},
              {"tokens_per_row", 256}}},
            {"model",
             {{"d_model", 48}, {"layers", 2}, {"heads", 4}, {"mlp", 96}, {"action_horizon", 4}}},
            {"seed", 5}}}};
}

TEST_F(EndToEndTest, TrainingOnAnImportedRobomimicDatasetSucceedsWithTheLossFalling) {
  const StackTenant owner = MakeTenant(stack_, "e2e-dataset-owner");
  ASSERT_GT(owner.id, 0);
  const std::string dataset = MakeTenantDataset("ok", owner.id);
  ASSERT_FALSE(dataset.empty());
  HttpResult submitted =
      stack_->Post("/v1/jobs", DatasetJob("e2e-dataset", dataset).dump(), owner.token);
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  const int64_t id = submitted.body["id"].get<int64_t>();
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["spec"]["engine"]["data"]["dataset"], "dir:" + dataset);
  HttpResult ev = stack_->Get("/v1/jobs/" + std::to_string(id) + "/events?type=step&limit=1000");
  ASSERT_EQ(ev.status, 200) << ev.text;
  const json& steps = ev.body["events"];
  ASSERT_EQ(steps.size(), 120u) << ev.text.substr(0, 500);
  auto mean_loss = [&](size_t begin, size_t end) {
    double s = 0.0;
    for (size_t i = begin; i < end; ++i) s += steps[i]["data"]["loss"].get<double>();
    return s / static_cast<double>(end - begin);
  };
  const double first = mean_loss(0, 10), last = mean_loss(110, 120);
  EXPECT_LT(last, 0.6 * first) << "mean loss of the first 10 steps " << first
                               << ", of the last 10 " << last;
  EXPECT_EQ(steps.back()["data"]["world_size"], 2);

  // Another tenant's job names the same directory: its ranks cannot enter the tenant's.
  if (::geteuid() == 0) {
    const StackTenant other = MakeTenant(stack_, "e2e-dataset-other");
    ASSERT_GT(other.id, 0);
    json spec = DatasetJob("e2e-dataset-other-tenant", dataset);
    spec["resources"]["nodes"] = 1;
    HttpResult r = stack_->Post("/v1/jobs", spec.dump(), other.token);
    ASSERT_EQ(r.status, 201) << r.text;
    const int64_t other_id = r.body["id"].get<int64_t>();
    json denied = stack_->WaitForState(other_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
    ASSERT_EQ(denied.value("state", ""), "FAILED") << denied.dump(2);
    const std::string logs =
        stack_->Get("/v1/jobs/" + std::to_string(other_id) + "/logs?rank=0").text;
    EXPECT_NE(logs.find("cannot open " + dataset + "/dataset.json"), std::string::npos)
        << logs.substr(0, 4000);
  }
  std::filesystem::remove_all(DatasetBase(dataset));
}

TEST_F(EndToEndTest, CorruptDatasetFailsTheJobNamingTheShard) {
  const StackTenant owner = MakeTenant(stack_, "e2e-dataset-bad");
  ASSERT_GT(owner.id, 0);
  const std::string dataset = MakeTenantDataset("bad", owner.id);
  ASSERT_FALSE(dataset.empty());
  auto m = storage::ReadManifest(dataset);
  ASSERT_TRUE(m.ok());
  const std::string shard = dataset + "/" + m->shards[2].file;
  storage::testing::FlipByte(shard, 64 + 10);  // the actions of demo_2
  HttpResult submitted =
      stack_->Post("/v1/jobs", DatasetJob("e2e-dataset-bad", dataset).dump(), owner.token);
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  const int64_t id = submitted.body["id"].get<int64_t>();
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 180);
  ASSERT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  std::string logs;
  for (int rank : {0, 1}) {
    logs += stack_->Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank))
                .text;
  }
  EXPECT_NE(logs.find(shard + " episode 0 (demo_2): checksum mismatch"), std::string::npos)
      << logs.substr(0, 4000);
  std::filesystem::remove_all(DatasetBase(dataset));
}

TEST_F(EndToEndTest, CancelStopsEveryProcess) {
  std::string marker = "embody-e2e-cancel-" + std::to_string(::getpid());
  json spec = {{"name", "e2e-cancel"},
               {"kind", "command"},
               {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
               {"command", {"sh", "-c", "echo " + marker + "; sleep 600"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  // Both ranks are up before we cancel.
  for (int i = 0; i < 100 && ProcessesWith(marker).size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(ProcessesWith(marker).size(), 2u);
  HttpResult c = stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}");
  ASSERT_EQ(c.status, 200) << c.text;
  job = stack_->WaitForState(id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
  EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  EXPECT_TRUE(ProcessesWith(marker).empty()) << "processes left after cancel";
  // This stack's processes only: another stack on the machine numbers its jobs from 1 too.
  std::vector<int> left = ProcessesWith("EMBODY_JOB_ID=" + std::to_string(id) + "\n");
  const std::vector<int> ours = ProcessesWith(stack_->dir() + "/");
  std::erase_if(left,
                [&](int pid) { return std::find(ours.begin(), ours.end(), pid) == ours.end(); });
  std::string named;
  for (int pid : left) {
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
    std::string arg, line;
    while (std::getline(cmd, arg, '\0')) line += arg + " ";
    named += std::to_string(pid) + ": " + line + "\n";
  }
  EXPECT_TRUE(left.empty()) << "processes of the job left after cancel:\n" << named;
  // A cancelled job cannot be cancelled again.
  EXPECT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}").status, 409);
}

TEST_F(EndToEndTest, CommandJobExitCodeIsRecorded) {
  json spec = {{"name", "e2e-exit3"},
               {"kind", "command"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"command", {"sh", "-c", "echo failing on purpose; exit 3"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 60);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_EQ(job["exit_code"], 3) << job.dump(2);
  HttpResult logs = stack_->Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0");
  EXPECT_NE(logs.text.find("failing on purpose"), std::string::npos) << logs.text;

  // Where its launch spent its time: every phase, in order, none negative (transit, across two
  // clocks, within their rounding), adding up to submission -> exit stored.
  const json lp = stack_->Get("/v1/jobs/" + std::to_string(id)).body["launch_phases"];
  ASSERT_TRUE(lp.is_object()) << job.dump(2);
  std::vector<std::string> names;
  int64_t sum = 0;
  for (const json& p : lp["phases"]) {
    names.push_back(p["phase"].get<std::string>());
    EXPECT_GE(p["ms"].get<int64_t>(), names.back() == "transit" ? -2 : 0) << lp.dump(2);
    sum += p["ms"].get<int64_t>();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"queued", "dispatch", "sandbox", "spawn", "run",
                                             "cleanup", "report", "transit"}))
      << lp.dump(2);
  EXPECT_EQ(sum, lp["total_ms"].get<int64_t>()) << lp.dump(2);
  EXPECT_EQ(lp["total_ms"].get<int64_t>(),
            common::ParseUtcTime(job["finished_at"].get<std::string>()).value_or(0) -
                common::ParseUtcTime(job["created_at"].get<std::string>()).value_or(0))
      << lp.dump(2);
  int64_t last = 0;
  for (const char* a : {"sandbox_prepared", "process_started", "exited", "slot_freed", "reported"}) {
    ASSERT_TRUE(lp["agent_ms"].contains(a)) << lp.dump(2);
    EXPECT_GE(lp["agent_ms"][a].get<int64_t>(), last) << a << ": " << lp.dump(2);
    last = lp["agent_ms"][a].get<int64_t>();
  }
  EXPECT_LE(lp["placed_at"].get<std::string>(), lp["launch_sent_at"].get<std::string>());
  EXPECT_LE(lp["launch_sent_at"].get<std::string>(), lp["exit_stored_at"].get<std::string>());
  HttpResult metrics = stack_->Get("/metrics");
  EXPECT_NE(metrics.text.find(R"(embody_job_launch_phase_seconds_count{phase="sandbox"})"),
            std::string::npos)
      << metrics.text;
}

// A job's start executes embody-job-exec, built beside the agent (agent/job_exec_main.cc),
// not the agent's own executable: a direct launch's ranks are its children, and the job's
// watcher is one.
TEST_F(EndToEndTest, JobStartsExecuteTheJobExecutableBesideTheAgent) {
  const std::string script =
      "echo parent=$(cat /proc/$PPID/comm); "
      "for d in /proc/[0-9]*; do "
      "  if tr '\\0' ' ' < $d/cmdline 2>/dev/null | grep -q '^[^ ]* watch-job '; then "
      "    echo watcher=$(cat $d/comm); fi; done";
  json spec = {{"name", "e2e-job-exec"},
               {"kind", "command"},
               {"launcher", "direct"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"command", {"sh", "-c", script}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  json job = stack_->WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 60);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  const std::string log = stack_->Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0").text;
  EXPECT_NE(log.find("parent=embody-job-exec\n"), std::string::npos) << log;
  EXPECT_NE(log.find("watcher=embody-job-exec\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("watcher=embody-agent"), std::string::npos) << log;
}

TEST_F(EndToEndTest, JobThatCanNeverFitIsRefusedWithWhatIsShort) {
  json spec = {{"name", "e2e-too-big"},
               {"kind", "command"},
               {"resources", {{"nodes", 3}, {"ranks_per_node", 1}}},
               {"command", {"true"}}};
  HttpResult r = stack_->Post("/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_NE(r.text.find("never fits: needs 3 nodes with 1 cpu slots each; the cluster has 2 such "
                        "nodes of 2"),
            std::string::npos)
      << r.text;
}

TEST_F(EndToEndTest, JobThatFitsNoFreeNodeStaysPendingWithReason) {
  // Both nodes together could hold it, but not while they are drained.
  json nodes = stack_->Get("/v1/nodes").body["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto& n : nodes) {
    ASSERT_EQ(stack_->Post("/v1/nodes/" + n["id"].dump() + "/drain", "{}").status, 200);
  }
  json spec = {{"name", "e2e-waits"},
               {"kind", "command"},
               {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
               {"command", {"true"}}};
  int64_t id = Submit(spec);
  ASSERT_GT(id, 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  HttpResult r = stack_->Get("/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(r.body.value("state", ""), "PENDING");
  EXPECT_FALSE(r.body.value("reason", "").empty()) << r.text;
  EXPECT_EQ(stack_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "{}").status, 200);
  EXPECT_EQ(stack_->WaitForState(id, {"CANCELLED"}, 10).value("state", ""), "CANCELLED");
  for (const auto& n : nodes) {
    EXPECT_EQ(stack_->Post("/v1/nodes/" + n["id"].dump() + "/undrain", "{}").status, 200);
  }
}

}  // namespace
}  // namespace embody_test
