// End to end, the dataset path as a user drives it: PostgreSQL + embody-server + two agents that
// share a dataset root, all real processes on loopback. A robomimic-layout HDF5 file made here is
// imported through POST /v1/datasets (an import job runs embody-data as an unprivileged uid),
// trained on through `engine.data.dataset: "dataset:NAME"`, versioned, kept from other tenants,
// refused while read and deleted; a bad file fails without leaving anything behind; the `embody`
// CLI imports and lists once. A LeRobot v2.1 dataset directory (parquet from an independent
// writer, videos encoded here) goes the same way with "format": "lerobot"; a v3.0 one by path and
// as an upload (a tar of the directory, made by GNU tar or by the CLI), through the API and the
// CLI, with LeRobot's own statistics checked; a hostile tar fails naming its member.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

#include <httplib.h>

#include "common/crypto.h"
#include "engine/testing/reach_hdf5.h"
#include "storage/testing/lerobot_fixture.h"
#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"
#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using TenantTokens = LocalStack::Tenant;

class DatasetApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_ = new LocalStack(2, 1);
    stack_->EnableDatasetRoot();
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
    a_ = new TenantTokens(stack_->AddTenant("ds-a"));
    b_ = new TenantTokens(stack_->AddTenant("ds-b"));
    inputs_ = stack_->dir() + "/inputs";
    fs::create_directories(inputs_);
    // The import job reads the file as an unprivileged uid: every directory on the way must let
    // it through (the stack's directory is 0755 already).
    fs::permissions(inputs_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  }
  static void TearDownTestSuite() {
    delete a_;
    delete b_;
    delete stack_;
    stack_ = nullptr;
  }


  // Writes a robomimic file the job users may read; returns its path and, through `episodes`,
  // what the importer must make of it.
  static std::string WriteInput(const std::string& name,
                                const storage::testing::RobomimicFileSpec& spec,
                                std::vector<storage::Episode>* episodes = nullptr) {
    const std::string path = inputs_ + "/" + name + ".hdf5";
    auto made = storage::testing::WriteRobomimicFile(path, spec);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                              fs::perms::others_read);
    if (episodes && made.ok()) *episodes = std::move(*made);
    return path;
  }

  static HttpResult Import(const std::string& name, const std::string& path,
                           const std::string& token) {
    return stack_->Post(
        "/v1/datasets",
        json{{"name", name}, {"source", {{"format", "hdf5"}, {"path", path}}}}.dump(), token);
  }

  // Polls GET /v1/datasets/{id} until it leaves `importing`; every progress value seen on the
  // way goes to `progress`.
  static json WaitForDataset(int64_t id, const std::string& token, double timeout_s,
                             std::vector<double>* progress = nullptr) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    json d;
    while (std::chrono::steady_clock::now() < end) {
      HttpResult r = stack_->Get("/v1/datasets/" + std::to_string(id), token);
      if (r.status == 200) {
        d = r.body;
        if (progress && d["progress"].is_number()) progress->push_back(d["progress"].get<double>());
        if (d.value("state", "") != "importing") return d;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return d;
  }

  // Imports `path` as `name` and waits until the version is ready; returns it (with manifest).
  static json ImportReady(const std::string& name, const std::string& path) {
    HttpResult r = Import(name, path, a_->member);
    EXPECT_EQ(r.status, 201) << r.text;
    if (r.status != 201) return json();
    json d = WaitForDataset(r.body["id"].get<int64_t>(), a_->member, 90);
    EXPECT_EQ(d.value("state", ""), "ready") << d.dump(2);
    return d;
  }

  // A small engine job on one rank of one node reading `dataset`; `steps` long.
  static json TrainSpec(const std::string& name, const std::string& dataset, int steps) {
    return {{"name", name},
            {"kind", "train"},
            {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
            {"engine",
             {{"optim", {{"steps", steps}, {"lr", 0.003}, {"warmup_steps", 10}}},
              {"data",
               {{"dataset", dataset},
                {"language", "reach the red blob"},
                {"rows_per_step", 2},
                {"tokens_per_row", 256}}},
              {"model",
               {{"d_model", 48}, {"layers", 2}, {"heads", 4}, {"mlp", 96}, {"action_horizon", 4}}},
              {"checkpoint", {{"every_steps", 0}}},
              {"seed", 3}}}};
  }

  static int64_t Submit(const json& spec, const std::string& token) {
    HttpResult r = stack_->Post("/v1/jobs", spec.dump(), token);
    EXPECT_EQ(r.status, 201) << r.text;
    return r.status == 201 ? r.body["id"].get<int64_t>() : -1;
  }

  // The dataset version job_datasets binds the job to, -1 when none.
  static int64_t BoundDataset(int64_t job_id) {
    auto out = stack_->pg().Psql("SELECT dataset_id FROM job_datasets WHERE job_id = " +
                                 std::to_string(job_id));
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok() || out->empty()) return -1;
    return std::stoll(*out);
  }

  static void CancelAndWait(int64_t job_id) {
    HttpResult c = stack_->Post("/v1/jobs/" + std::to_string(job_id) + "/cancel", "{}");
    EXPECT_EQ(c.status, 200) << c.text;
    json job = stack_->WaitForState(job_id, {"CANCELLED", "FAILED", "SUCCEEDED"}, 60);
    EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
  }

  static std::string TenantDir(int64_t tenant_id) {
    return stack_->dataset_root() + "/tenant-" + std::to_string(tenant_id);
  }

  static LocalStack* stack_;
  static TenantTokens* a_;
  static TenantTokens* b_;
  static std::string inputs_;
};

LocalStack* DatasetApiTest::stack_ = nullptr;
TenantTokens* DatasetApiTest::a_ = nullptr;
TenantTokens* DatasetApiTest::b_ = nullptr;
std::string DatasetApiTest::inputs_;

// Per element of the last dimension, as the manifest keeps them: min, max, mean and the
// population standard deviation over every frame of every episode.
struct ExpectedStats {
  std::vector<double> min, max, mean, std;
};

ExpectedStats StatsOf(const std::vector<storage::Episode>& episodes, const std::string& key) {
  std::vector<std::vector<double>> values;
  for (const storage::Episode& ep : episodes) {
    const storage::Array* a = ep.Find(key);
    if (!a || a->spec.dtype != storage::DType::kF64) continue;
    const int64_t groups = a->spec.frame_shape.empty() ? 1 : a->spec.frame_shape.back();
    values.resize(static_cast<size_t>(groups));
    const double* x = reinterpret_cast<const double*>(a->data.data());
    const int64_t n = a->frames * a->spec.FrameElements();
    for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i % groups)].push_back(x[i]);
  }
  ExpectedStats s;
  for (const auto& v : values) {
    double sum = 0, mn = std::numeric_limits<double>::infinity(), mx = -mn;
    for (double x : v) sum += x, mn = std::min(mn, x), mx = std::max(mx, x);
    const double mean = sum / static_cast<double>(v.size());
    double m2 = 0;
    for (double x : v) m2 += (x - mean) * (x - mean);
    s.min.push_back(mn);
    s.max.push_back(mx);
    s.mean.push_back(mean);
    s.std.push_back(std::sqrt(m2 / static_cast<double>(v.size())));
  }
  return s;
}

void ExpectNear(const json& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_TRUE(got.is_array()) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].get<double>(), want[i], 1e-9) << what << "[" << i << "]";
  }
}

// Everything under `dir` (and `dir` itself) is root's and read-only: directories 0755, files
// 0444.
void ExpectRootOwnedReadOnly(const std::string& dir) {
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0) << dir;
  EXPECT_EQ(st.st_uid, 0u) << dir;
  EXPECT_EQ(st.st_mode & 07777, 0755u) << dir;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string p = e.path().string();
    ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 0u) << p;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 0755u) << p;
    } else {
      EXPECT_TRUE(S_ISREG(st.st_mode)) << p;
      EXPECT_EQ(st.st_mode & 07777, 0444u) << p;
      ++files;
    }
  }
  EXPECT_GE(files, 2) << "a manifest and at least one shard in " << dir;
}

// The import job reads a tree as an unprivileged uid: directories 0755, files 0644.
void OpenToJobs(const std::string& dir) {
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    fs::permissions(entry.path(), entry.is_directory()
                                      ? fs::perms::owner_all | fs::perms::group_read |
                                            fs::perms::group_exec | fs::perms::others_read |
                                            fs::perms::others_exec
                                      : fs::perms::owner_read | fs::perms::owner_write |
                                            fs::perms::group_read | fs::perms::others_read);
  }
}

// No staging directory of any import is left in the tenant's directory.
void ExpectNoStaging(const std::string& tenant_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tenant_dir, ec)) {
    EXPECT_NE(e.path().filename().string().rfind(".import-", 0), 0u) << e.path();
  }
}

double MeanLoss(const json& steps, size_t begin, size_t end) {
  double s = 0.0;
  for (size_t i = begin; i < end; ++i) s += steps[i]["data"]["loss"].get<double>();
  return s / static_cast<double>(end - begin);
}

TEST_F(DatasetApiTest, ImportTrainVersionKeepFromOthersAndDelete) {
  ASSERT_FALSE(a_->member.empty());
  ASSERT_FALSE(b_->member.empty());
  // 1. Import: progress, counts, statistics and a sealed directory.
  storage::testing::RobomimicFileSpec spec;
  spec.demos = 4;
  spec.frames_per_demo = {10, 12, 14, 16};
  std::vector<storage::Episode> episodes;
  const std::string file = WriteInput("lift-v1", spec, &episodes);
  ASSERT_EQ(episodes.size(), 4u);
  HttpResult r = Import("lift", file, a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  const int64_t v1 = r.body["id"].get<int64_t>();
  EXPECT_EQ(r.body["state"], "importing");
  EXPECT_EQ(r.body["version"], 1);
  EXPECT_EQ(r.body["tenant_id"], a_->id);
  ASSERT_TRUE(r.body["job_id"].is_number_integer()) << r.text;
  const std::string v1_dir = TenantDir(a_->id) + "/dataset-" + std::to_string(v1);
  EXPECT_EQ(r.body["path"], v1_dir);
  std::vector<double> progress;
  json d = WaitForDataset(v1, a_->member, 90, &progress);
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["error"], "");
  EXPECT_EQ(d["progress"], 1.0);
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end())) << json(progress).dump();
  json import_job = stack_->WaitForState(d["job_id"].get<int64_t>(), {"SUCCEEDED"}, 10);
  EXPECT_EQ(import_job.value("state", ""), "SUCCEEDED") << import_job.dump(2);

  EXPECT_EQ(d["episodes"], 4);
  EXPECT_EQ(d["frames"], 10 + 12 + 14 + 16);
  const json& m = d["manifest"];
  ASSERT_TRUE(m.is_object()) << d.dump(2);
  EXPECT_EQ(m["stats"]["episodes"], 4);
  EXPECT_EQ(m["stats"]["frames"], 52);
  EXPECT_EQ(m["source"]["path"], file);
  // bytes: the shards the manifest lists, as they lie on disk.
  int64_t shard_bytes = 0, disk_bytes = 0;
  for (const json& s : m["shards"]) {
    shard_bytes += s["bytes"].get<int64_t>();
    disk_bytes += static_cast<int64_t>(fs::file_size(v1_dir + "/" + s["file"].get<std::string>()));
  }
  EXPECT_GT(shard_bytes, 0);
  EXPECT_EQ(d["bytes"], shard_bytes);
  EXPECT_EQ(disk_bytes, shard_bytes);
  // Statistics of the low-dim keys, recomputed from what the file holds.
  for (const std::string key : {"actions", "obs/robot0_eef_pos", "obs/robot0_gripper_qpos"}) {
    auto it = std::find_if(m["stats"]["keys"].begin(), m["stats"]["keys"].end(),
                           [&](const json& k) { return k["name"] == key; });
    ASSERT_NE(it, m["stats"]["keys"].end()) << key << " not in " << m["stats"].dump();
    EXPECT_EQ((*it)["shape"], json(episodes[0].Find(key)->spec.frame_shape)) << key;
    const ExpectedStats want = StatsOf(episodes, key);
    ASSERT_FALSE(want.mean.empty()) << key;
    ExpectNear((*it)["min"], want.min, key + " min");
    ExpectNear((*it)["max"], want.max, key + " max");
    ExpectNear((*it)["mean"], want.mean, key + " mean");
    ExpectNear((*it)["std"], want.std, key + " std");
  }
  ExpectRootOwnedReadOnly(v1_dir);
  ExpectNoStaging(TenantDir(a_->id));

  // 5. Tenant B sees none of it.
  EXPECT_EQ(stack_->Get("/v1/datasets/" + std::to_string(v1), b_->member).status, 404);
  HttpResult b_list = stack_->Get("/v1/datasets", b_->member);
  ASSERT_EQ(b_list.status, 200) << b_list.text;
  EXPECT_TRUE(b_list.body["datasets"].empty()) << b_list.text;
  HttpResult b_submit =
      stack_->Post("/v1/jobs", TrainSpec("b-steals", "dataset:lift", 10).dump(), b_->member);
  EXPECT_EQ(b_submit.status, 422) << b_submit.text;
  EXPECT_EQ(b_submit.body["error"]["field"], "engine.data.dataset") << b_submit.text;
  EXPECT_EQ(stack_->Delete("/v1/datasets/" + std::to_string(v1), b_->member).status, 404);

  // 3. A second import of the same name is version 2: a reach task a policy can learn.
  const std::string reach = inputs_ + "/reach.hdf5";
  engine::testing::ReachHdf5Spec reach_spec;
  reach_spec.image_size = 32;
  ASSERT_TRUE(engine::testing::WriteReachHdf5(reach, reach_spec).ok());
  fs::permissions(reach, fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  json d2 = ImportReady("lift", reach);
  ASSERT_EQ(d2.value("state", ""), "ready");
  const int64_t v2 = d2["id"].get<int64_t>();
  const std::string v2_dir = TenantDir(a_->id) + "/dataset-" + std::to_string(v2);
  EXPECT_EQ(d2["version"], 2);
  EXPECT_EQ(d2["episodes"], reach_spec.demos);
  EXPECT_EQ(d2["frames"], reach_spec.demos * reach_spec.frames);
  ExpectRootOwnedReadOnly(v2_dir);

  // 2. Train on it by name: the newest ready version; the loss falls, the stored spec keeps the
  // name, job_datasets binds the job to v2.
  const int64_t train = Submit(TrainSpec("lift-bc", "dataset:lift", 200), a_->member);
  ASSERT_GT(train, 0);
  EXPECT_EQ(BoundDataset(train), v2);
  // @1 still names version 1: a job pinned to it, left running.
  const int64_t pinned = Submit(TrainSpec("lift-pinned", "dataset:lift@1", 100000), a_->member);
  ASSERT_GT(pinned, 0);
  EXPECT_EQ(BoundDataset(pinned), v1);
  json job = stack_->WaitForState(train, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["spec"]["engine"]["data"]["dataset"], "dataset:lift");
  HttpResult ev = stack_->Get("/v1/jobs/" + std::to_string(train) + "/events?type=step&limit=1000");
  ASSERT_EQ(ev.status, 200) << ev.text;
  const json& steps = ev.body["events"];
  ASSERT_EQ(steps.size(), 200u) << ev.text.substr(0, 500);
  // The flow-matching loss is noisy step to step (random t and noise): compare means of 10.
  const double first = MeanLoss(steps, 0, 10), last = MeanLoss(steps, 190, 200);
  EXPECT_LT(last, 0.6 * first) << "mean loss of the first 10 steps " << first << ", of the last 10 "
                               << last;

  // 6. Deleting v1 is refused while the pinned job has not ended, naming it.
  json running = stack_->WaitForState(pinned, {"RUNNING"}, 60);
  EXPECT_EQ(running.value("state", ""), "RUNNING") << running.dump(2);
  HttpResult busy = stack_->Delete("/v1/datasets/" + std::to_string(v1), a_->member);
  EXPECT_EQ(busy.status, 409) << busy.text;
  EXPECT_NE(busy.text.find("jobs that have not ended: " + std::to_string(pinned)),
            std::string::npos)
      << busy.text;
  EXPECT_TRUE(fs::exists(v1_dir));
  // v2's reader has ended: it goes, and the name falls back to v1, the next newest ready one.
  HttpResult del2 = stack_->Delete("/v1/datasets/" + std::to_string(v2), a_->member);
  ASSERT_EQ(del2.status, 200) << del2.text;
  EXPECT_EQ(del2.body["state"], "deleted");
  EXPECT_EQ(del2.body["directory_removed"], true) << del2.text;
  EXPECT_FALSE(fs::exists(v2_dir));
  EXPECT_EQ(stack_->Get("/v1/datasets/" + std::to_string(v2), a_->member).body.value("state", ""),
            "deleted");
  const int64_t on_v1 = Submit(TrainSpec("lift-next", "dataset:lift", 100000), a_->member);
  ASSERT_GT(on_v1, 0);
  EXPECT_EQ(BoundDataset(on_v1), v1);
  HttpResult v2_gone =
      stack_->Post("/v1/jobs", TrainSpec("lift-v2", "dataset:lift@2", 10).dump(), a_->member);
  EXPECT_EQ(v2_gone.status, 422) << v2_gone.text;
  EXPECT_EQ(v2_gone.body["error"]["field"], "engine.data.dataset") << v2_gone.text;
  // Once v1's readers have ended it goes too, and the name resolves to nothing.
  CancelAndWait(pinned);
  CancelAndWait(on_v1);
  HttpResult del = stack_->Delete("/v1/datasets/" + std::to_string(v1), a_->member);
  ASSERT_EQ(del.status, 200) << del.text;
  EXPECT_EQ(del.body["directory_removed"], true) << del.text;
  EXPECT_FALSE(fs::exists(v1_dir));
  HttpResult none =
      stack_->Post("/v1/jobs", TrainSpec("lift-none", "dataset:lift", 10).dump(), a_->member);
  EXPECT_EQ(none.status, 422) << none.text;
  EXPECT_NE(none.text.find("has no ready version"), std::string::npos) << none.text;
  ExpectNoStaging(TenantDir(a_->id));
}

// 4. NaN in the actions of one demo: the version fails naming file and demo, and nothing of it
// is left under the dataset root.
TEST_F(DatasetApiTest, BadFileFailsNamingFileAndDemoAndLeavesNothing) {
  ASSERT_FALSE(a_->member.empty());
  storage::testing::RobomimicFileSpec spec;
  spec.demos = 3;
  spec.frames = 8;
  const std::string file = WriteInput("nan-actions", spec);
  {
    auto w = storage::testing::Hdf5Writer::OpenForEdit(file);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::vector<double> actions(8 * 7, 0.25);
    actions[3 * 7 + 2] = std::nan("");
    ASSERT_TRUE(w->Delete("data/demo_1/actions").ok());
    ASSERT_TRUE(w->WriteDataset("data/demo_1/actions", storage::testing::Hdf5Writer::Type::kF64,
                                {8, 7}, actions.data())
                    .ok());
  }
  HttpResult r = Import("broken", file, a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  const int64_t id = r.body["id"].get<int64_t>();
  json d = WaitForDataset(id, a_->member, 90);
  ASSERT_EQ(d.value("state", ""), "failed") << d.dump(2);
  const std::string error = d["error"];
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find("demo_1"), std::string::npos) << error;
  EXPECT_NE(error.find("NaN"), std::string::npos) << error;
  EXPECT_TRUE(d["manifest"].is_null()) << d.dump(2);
  EXPECT_EQ(d["episodes"], 0);
  json job = stack_->WaitForState(d["job_id"].get<int64_t>(), {"FAILED"}, 10);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_FALSE(fs::exists(TenantDir(a_->id) + "/dataset-" + std::to_string(id)));
  EXPECT_FALSE(fs::exists(TenantDir(a_->id) + "/.import-" + std::to_string(id)));
  ExpectNoStaging(TenantDir(a_->id));
  // A failed version names nothing a job could train on.
  HttpResult submit =
      stack_->Post("/v1/jobs", TrainSpec("broken", "dataset:broken@1", 10).dump(), a_->member);
  EXPECT_EQ(submit.status, 422) << submit.text;
}

// 7. The CLI: `embody datasets import`, then `embody datasets ls -o json`.
TEST_F(DatasetApiTest, CliImportsAndLists) {
  ASSERT_FALSE(a_->member.empty());
  storage::testing::RobomimicFileSpec spec;
  spec.demos = 2;
  spec.frames = 6;
  spec.cameras = 1;
  const std::string file = WriteInput("cli", spec);
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"env", "EMBODY_URL=" + stack_->url(),
                                  "EMBODY_TOKEN=" + a_->member, LocalStack::bin_dir() + "/embody"};
    argv.insert(argv.end(), args.begin(), args.end());
    return embody::testing::RunCommand(argv);
  };
  auto imported = cli({"datasets", "import", "from-cli", file});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("from-cli"), std::string::npos) << imported.output;
  auto listed = cli({"datasets", "ls", "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  json ls = json::parse(listed.output, nullptr, false);
  ASSERT_TRUE(ls.is_object() && ls["datasets"].is_array()) << listed.output;
  auto it = std::find_if(ls["datasets"].begin(), ls["datasets"].end(),
                         [](const json& x) { return x["name"] == "from-cli"; });
  ASSERT_NE(it, ls["datasets"].end()) << listed.output;
  EXPECT_EQ((*it)["version"], 1);
  EXPECT_EQ((*it)["tenant_id"], a_->id);
  json d = WaitForDataset((*it)["id"].get<int64_t>(), a_->member, 90);
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["episodes"], 2);
  EXPECT_EQ(d["frames"], 12);
  listed = cli({"datasets", "ls", "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  ls = json::parse(listed.output, nullptr, false);
  ASSERT_TRUE(ls.is_object()) << listed.output;
  bool ready = false;
  for (const json& x : ls["datasets"]) ready |= x["name"] == "from-cli" && x["state"] == "ready";
  EXPECT_TRUE(ready) << listed.output;
}

// 8. A LeRobot v2.1 dataset directory (the parquet files and metadata storage/parquet/testdata/
// gen_lerobot.mjs writes at build time, videos encoded here) through POST /v1/datasets and the
// CLI: the import job runs `embody-data import-lerobot --report`, progress shows, and the version
// lands with every episode. A file named as the directory fails the import saying so.
TEST_F(DatasetApiTest, LerobotDirectoryImportsThroughTheApiAndTheCli) {
  ASSERT_FALSE(a_->member.empty());
  const fs::path fixtures = EMBODY_LEROBOT_FIXTURES;
  if (fs::exists(fixtures.parent_path() / "UNAVAILABLE") ||
      !fs::exists(fixtures / "expected.json")) {
    GTEST_SKIP() << "LeRobot datasets from parquet-wasm were not generated (node/npm missing; "
                    "see "
                 << fixtures.parent_path() / "UNAVAILABLE"
                 << ", target parquet_fixtures)";
  }
  std::ifstream ein(fixtures / "expected.json");
  const json expected = json::parse(ein);
  const int h = expected["height"], w = expected["width"];
  const std::string dir = inputs_ + "/lerobot-v21";
  fs::copy(fixtures / "v21", dir, fs::copy_options::recursive);
  storage::testing::VideoWriteOptions vo;
  vo.fps = expected["fps"];
  int64_t total_frames = 0;
  for (const json& e : expected["episodes"]) total_frames += e["length"].get<int64_t>();
  for (const json& v : expected["videos"]["v21"]) {
    std::vector<uint8_t> rgb;
    int64_t frames = 0;
    for (const json& e : v["episodes"]) {
      const int64_t n = expected["episodes"][e.get<size_t>()]["length"];
      auto f = storage::testing::BlockFrames(e.get<uint64_t>() + 1, n, h, w);
      rgb.insert(rgb.end(), f.begin(), f.end());
      frames += n;
    }
    const std::string path = dir + "/" + v["path"].get<std::string>();
    fs::create_directories(fs::path(path).parent_path());
    ASSERT_TRUE(storage::testing::WriteVideo(path, rgb.data(), frames, h, w, vo).ok()) << path;
  }
  OpenToJobs(dir);

  HttpResult r =
      stack_->Post("/v1/datasets",
                   json{{"name", "pusht"},
                        {"source", {{"format", "lerobot"}, {"path", dir}, {"resize", "16x24"}}}}
                       .dump(),
                   a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.body["source"]["format"], "lerobot");
  json d = WaitForDataset(r.body["id"].get<int64_t>(), a_->member, 120);
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["episodes"], expected["episodes"].size());
  EXPECT_EQ(d["frames"], total_frames);
  EXPECT_EQ(d["progress"], 1.0);
  ASSERT_TRUE(d["manifest"].is_object()) << d.dump(2);
  EXPECT_EQ(d["manifest"]["source"]["type"], "lerobot");
  EXPECT_EQ(d["manifest"]["source"]["codebase_version"], "v2.1");
  EXPECT_EQ(d["manifest"]["source"]["resize"], json({16, 24}));
  EXPECT_TRUE(fs::exists(d["path"].get<std::string>() + "/dataset.json")) << d.dump(2);
  ExpectNoStaging(TenantDir(a_->id));

  // Training on it: a model left at 7 action dimensions is refused at submit, naming the
  // dataset's 26 and the spec's field; with the dataset's widths the job trains, its 26-value
  // state in two state tokens and its camera as patches.
  json misfit = TrainSpec("pusht-7", "dataset:pusht", 40);
  HttpResult refused = stack_->Post("/v1/jobs", misfit.dump(), a_->member);
  EXPECT_EQ(refused.status, 400) << refused.text;
  EXPECT_NE(refused.text.find("dataset pusht@1: the dataset's actions have 26 dimensions but "
                              "engine.model.action_dim is 7"),
            std::string::npos)
      << refused.text;
  EXPECT_NE(refused.text.find("engine.model.action_dim"), std::string::npos) << refused.text;
  json fit = TrainSpec("pusht-bc", "dataset:pusht", 40);
  fit["engine"]["model"]["action_dim"] = 26;
  fit["engine"]["data"]["image_size"] = 16;
  const int64_t train = Submit(fit, a_->member);
  ASSERT_GT(train, 0);
  json trained = stack_->WaitForState(train, {"SUCCEEDED", "FAILED", "CANCELLED"}, 120);
  ASSERT_EQ(trained.value("state", ""), "SUCCEEDED") << trained.dump(2);
  HttpResult ev = stack_->Get("/v1/jobs/" + std::to_string(train) + "/events?type=step&limit=100");
  ASSERT_EQ(ev.status, 200) << ev.text;
  ASSERT_EQ(ev.body["events"].size(), 40u) << ev.text.substr(0, 500);
  for (const json& e : ev.body["events"]) {
    ASSERT_TRUE(std::isfinite(e["data"]["loss"].get<double>())) << e.dump();
  }
  HttpResult logs = stack_->Get("/v1/jobs/" + std::to_string(train) + "/logs", a_->member);
  ASSERT_EQ(logs.status, 200) << logs.text.substr(0, 300);
  EXPECT_NE(logs.text.find(R"("state_tokens":"2")"), std::string::npos) << logs.text.substr(0, 3000);
  EXPECT_NE(logs.text.find(R"("cameras":"obs/)"), std::string::npos) << logs.text.substr(0, 3000);

  // Export back: the CLI downloads the version's files and writes a LeRobot v3.0 dataset, which
  // imports again through the API with every episode and frame. The files are the tenant's own.
  const std::string version = std::to_string(r.body["id"].get<int64_t>());
  EXPECT_EQ(stack_->Get("/v1/datasets/" + version + "/files/dataset.json", b_->member).status, 404);
  EXPECT_EQ(stack_->Get("/v1/datasets/" + version + "/files/upload.tar", a_->member).status, 404);
  HttpResult manifest_file =
      stack_->Get("/v1/datasets/" + version + "/files/dataset.json", a_->member);
  ASSERT_EQ(manifest_file.status, 200) << manifest_file.text.substr(0, 300);
  EXPECT_EQ(manifest_file.body["stats"]["frames"], total_frames);
  const std::string exported = inputs_ + "/pusht-exported";
  auto exported_cli = embody::testing::RunCommand(
      {"env", "EMBODY_URL=" + stack_->url(), "EMBODY_TOKEN=" + a_->member,
       LocalStack::bin_dir() + "/embody", "datasets", "export", version, exported, "--format",
       "lerobot"});
  ASSERT_EQ(exported_cli.exit_code, 0) << exported_cli.output;
  ASSERT_TRUE(fs::exists(exported + "/meta/info.json")) << exported_cli.output;
  EXPECT_TRUE(fs::exists(exported + "/data/chunk-000/file-000.parquet"));
  for (const auto& e : fs::directory_iterator(inputs_)) {  // the download is gone
    EXPECT_EQ(e.path().filename().string().find(".pusht-exported.download"), std::string::npos)
        << e.path();
  }
  OpenToJobs(exported);
  HttpResult again = stack_->Post(
      "/v1/datasets",
      json{{"name", "pusht-back"}, {"source", {{"format", "lerobot"}, {"path", exported}}}}.dump(),
      a_->member);
  ASSERT_EQ(again.status, 201) << again.text;
  json back = WaitForDataset(again.body["id"].get<int64_t>(), a_->member, 120);
  ASSERT_EQ(back.value("state", ""), "ready") << back.dump(2);
  EXPECT_EQ(back["episodes"], expected["episodes"].size());
  EXPECT_EQ(back["frames"], total_frames);
  EXPECT_EQ(back["manifest"]["source"]["codebase_version"], "v3.0");

  // The CLI takes the same directory as the next version.
  auto cli = embody::testing::RunCommand({"env", "EMBODY_URL=" + stack_->url(),
                                          "EMBODY_TOKEN=" + a_->member,
                                          LocalStack::bin_dir() + "/embody", "datasets", "import",
                                          "pusht", dir, "--format", "lerobot", "-o", "json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json v2 = json::parse(cli.output, nullptr, false);
  ASSERT_TRUE(v2.is_object()) << cli.output;
  EXPECT_EQ(v2["version"], 2);
  d = WaitForDataset(v2["id"].get<int64_t>(), a_->member, 120);
  ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
  EXPECT_EQ(d["episodes"], expected["episodes"].size());

  // A file where the directory should be: the server cannot look (the path is read only where
  // the job runs), so the import fails and says what it found.
  const std::string file = dir + "/meta/info.json";
  r = stack_->Post(
      "/v1/datasets",
      json{{"name", "not-a-dir"}, {"source", {{"format", "lerobot"}, {"path", file}}}}.dump(),
      a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  d = WaitForDataset(r.body["id"].get<int64_t>(), a_->member, 90);
  ASSERT_EQ(d.value("state", ""), "failed") << d.dump(2);
  const std::string error = d.value("error", "");
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find("file"), std::string::npos) << error;
  ExpectNoStaging(TenantDir(a_->id));
}

// 9. A LeRobot v3.0 dataset four ways: by path through the API and the CLI, and uploaded as a
// tar through the API (the tar made by GNU tar, sent in two chunks) and the CLI (`embody datasets
// upload NAME DIR --format lerobot` packs the directory itself). The import job unpacks the
// upload in its staging directory and removes it; every version lands with every episode and
// LeRobot's meta/stats.json agreeing with the frames. A tar holding a symbolic link fails the
// version, naming the member, with nothing left behind.
TEST_F(DatasetApiTest, LerobotV30ByPathAndByUploadThroughTheApiAndTheCli) {
  ASSERT_FALSE(a_->member.empty());
  auto fixtures = storage::testing::FindLerobotFixtures(EMBODY_LEROBOT_FIXTURES);
  if (!fixtures.ok()) GTEST_SKIP() << fixtures.status().message();
  if (std::system("command -v tar >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "GNU tar is not installed (Debian package tar)";
  }
  const std::string dir = inputs_ + "/lerobot-v30";
  ASSERT_TRUE(storage::testing::MakeLerobotDataset(*fixtures, "v30", dir).ok());
  OpenToJobs(dir);
  const size_t episodes = fixtures->expected["episodes"].size();
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"env", "EMBODY_URL=" + stack_->url(),
                                  "EMBODY_TOKEN=" + a_->member, LocalStack::bin_dir() + "/embody"};
    argv.insert(argv.end(), args.begin(), args.end());
    return embody::testing::RunCommand(argv);
  };
  // Every way ends the same: ready, every episode, v3.0, LeRobot's statistics agreeing.
  auto expect_ready = [&](int64_t id, bool uploaded) {
    json d = WaitForDataset(id, a_->member, 120);
    ASSERT_EQ(d.value("state", ""), "ready") << d.dump(2);
    EXPECT_EQ(d["episodes"], episodes);
    const json& source = d["manifest"]["source"];
    EXPECT_EQ(source["codebase_version"], "v3.0");
    EXPECT_EQ(source.value("archive", ""), uploaded ? "tar" : "") << source.dump();
    EXPECT_EQ(source["stats_check"]["file"], "meta/stats.json") << source.dump();
    EXPECT_EQ(source["stats_check"]["compared"], json({"actions", "obs/state"}));
    EXPECT_TRUE(source["stats_check"]["ok"]) << source.dump();
    ExpectNoStaging(TenantDir(a_->id));
  };

  // By path: the API, then the CLI.
  HttpResult r = stack_->Post(
      "/v1/datasets",
      json{{"name", "v30"}, {"source", {{"format", "lerobot"}, {"path", dir}}}}.dump(),
      a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  expect_ready(r.body["id"].get<int64_t>(), false);
  auto imported = cli({"datasets", "import", "v30", dir, "--format", "lerobot", "-o", "json"});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  json v = json::parse(imported.output, nullptr, false);
  ASSERT_TRUE(v.is_object()) << imported.output;
  expect_ready(v["id"].get<int64_t>(), false);

  // Uploaded through the API: a tar GNU tar wrote, declared, sent in two chunks, committed.
  const std::string tar = stack_->dir() + "/v30.tar";
  ASSERT_EQ(std::system(("tar -cf " + tar + " -C " + dir + " .").c_str()), 0);
  std::ifstream tin(tar, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(tin)), std::istreambuf_iterator<char>());
  r = stack_->Post("/v1/datasets",
                   json{{"name", "v30-up"},
                        {"source",
                         {{"format", "lerobot"},
                          {"upload", {{"bytes", bytes.size()}, {"sha256", common::Sha256Hex(bytes)}}}}}}
                       .dump(),
                   a_->member);
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.body["state"], "uploading");
  EXPECT_EQ(r.body["source"]["format"], "lerobot");
  const int64_t up_id = r.body["id"];
  const std::string upload = "/v1/datasets/" + std::to_string(up_id) + "/upload";
  httplib::Client c(stack_->url());
  c.set_bearer_token_auth(a_->member.c_str());
  const size_t half = bytes.size() / 2;
  for (size_t off : {size_t{0}, half}) {
    const std::string part = bytes.substr(off, off == 0 ? half : std::string::npos);
    auto res = c.Put((upload + "?offset=" + std::to_string(off)).c_str(), part,
                     "application/octet-stream");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  HttpResult committed = stack_->Post(upload + "/commit", "{}", a_->member);
  ASSERT_EQ(committed.status, 200) << committed.text;
  expect_ready(up_id, true);

  // Uploaded with the CLI, which packs the directory itself.
  auto uploaded = cli({"datasets", "upload", "v30-up", dir, "--format", "lerobot", "-o", "json"});
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.output;
  const size_t brace = uploaded.output.find("{\"");
  ASSERT_NE(brace, std::string::npos) << uploaded.output;
  v = json::parse(uploaded.output.substr(brace), nullptr, false);
  ASSERT_TRUE(v.is_object()) << uploaded.output;
  EXPECT_EQ(v["version"], 2);
  expect_ready(v["id"].get<int64_t>(), true);

  // A tar made elsewhere that holds a symbolic link: the version fails naming the member.
  fs::create_symlink("/etc", dir + "/meta/escape");
  const std::string evil = stack_->dir() + "/evil.tar";
  ASSERT_EQ(std::system(("tar -cf " + evil + " -C " + dir + " .").c_str()), 0);
  fs::remove(dir + "/meta/escape");
  auto refused = cli({"datasets", "upload", "evil", evil, "--format", "lerobot", "-o", "json"});
  ASSERT_EQ(refused.exit_code, 0) << refused.output;  // the upload itself is fine
  const size_t at = refused.output.find("{\"");
  ASSERT_NE(at, std::string::npos) << refused.output;
  json d = WaitForDataset(json::parse(refused.output.substr(at))["id"].get<int64_t>(), a_->member,
                          90);
  ASSERT_EQ(d.value("state", ""), "failed") << d.dump(2);
  EXPECT_NE(d.value("error", "").find("'./meta/escape': a symbolic link"), std::string::npos)
      << d.dump(2);
  ExpectNoStaging(TenantDir(a_->id));
}

}  // namespace
}  // namespace embody_test
