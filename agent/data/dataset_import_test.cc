// Import jobs on the agent: the argv embody-data gets, the paths under the dataset root, the
// tenant directories' owners and modes (opened to the tenant's group only, fixed when an earlier
// agent left them readable by anyone), and the publish step that seals the output and refuses
// anything but plain files and directories.
#include "agent/data/dataset_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/launch/mpi_launch.h"
#include "common/file_util.h"

namespace agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ImportSpec(int64_t id) {
  return json{{"name", "import-lift-v1"},
              {"kind", "import"},
              {"resources", {{"nodes", 1}}},
              {"import",
               {{"dataset_id", id},
                {"source", {{"path", "/d/lift.hdf5"}, {"filter", "train"}, {"language", "-x"}}}}}};
}

std::string TempRoot() {
  std::string tmpl = "/tmp/embody-dataset-import-XXXXXX";
  return mkdtemp(tmpl.data());
}

TEST(DatasetImportTest, PathsAndArgv) {
  EXPECT_EQ(ImportPathsFor("", 2, ImportSpec(5)).status().code(),
            common::Code::kFailedPrecondition);
  EXPECT_FALSE(ImportPathsFor("/r", 2, json{{"kind", "import"}}).ok());
  auto p = ImportPathsFor("/r", 2, ImportSpec(5));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->final_dir, "/r/tenant-2/dataset-5");
  EXPECT_EQ(p->output_dir, "/r/tenant-2/.import-5/dataset");

  LaunchInput in;
  in.job_id = 9;
  in.spec = ImportSpec(5);
  in.hosts = {{1, "n", "127.0.0.1", 1}};
  in.local_address = "127.0.0.1";
  in.job_dir = "/data/jobs/job-9";
  in.rank_exec = "/bin/embody-agent";
  in.embody_data = "/bin/embody-data";
  in.import_output = p->output_dir;
  auto plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  json argv = json::parse(plan->command)["argv"];
  EXPECT_EQ(argv, json({"/bin/embody-data", "import-hdf5", "/d/lift.hdf5", p->output_dir,
                        "--report", "--filter=train", "--language=-x"}));
  in.spec["import"]["source"]["nan"] = "skip";
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(json::parse(plan->command)["argv"].back(), "--nan=skip");
  // A LeRobot directory runs import-lerobot, one episode at a time on the job's one slot.
  in.spec["import"]["source"] = {{"format", "lerobot"}, {"path", "/d/pusht"}, {"resize", "96x128"}};
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(json::parse(plan->command)["argv"],
            json({"/bin/embody-data", "import-lerobot", "/d/pusht", p->output_dir, "--report",
                  "--resize=96x128", "--threads=1"}));
  // A LeRobot upload: the node's copy is a tar of the directory, which embody-data unpacks.
  in.spec["import"]["source"]["path"] = "/data/jobs/job-9/upload.tar";
  in.import_archive = true;
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(json::parse(plan->command)["argv"],
            json({"/bin/embody-data", "import-lerobot", "/data/jobs/job-9/upload.tar",
                  p->output_dir, "--report", "--resize=96x128", "--tar", "--threads=1"}));
  // An OCI image layout tar, from a path or an upload, is unpacked and checked by import-oci.
  in.spec["import"]["source"] = {{"format", "oci"}, {"path", "/data/jobs/job-9/upload.tar"}};
  plan = BuildLaunchPlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(json::parse(plan->command)["argv"],
            json({"/bin/embody-data", "import-oci", "/data/jobs/job-9/upload.tar", p->output_dir,
                  "--report"}));
  in.spec["import"]["source"] = {{"format", "lerobot"}, {"path", "/d/pusht"}};
  in.import_archive = false;
  in.spec["import"]["source"]["filter"] = "train";  // an hdf5 option
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
  in.spec["import"]["source"] = {{"format", "hdf5"}, {"path", "/d/lift.hdf5"}};
  // What the server would have refused is refused here too.
  in.spec["import"]["source"]["path"] = "/d/../etc/shadow";
  EXPECT_FALSE(BuildLaunchPlan(in).ok());
}

TEST(DatasetImportTest, PublishSealsAndRenamesOrRefuses) {
  const std::string root = TempRoot();
  auto p = ImportPathsFor(root, 3, ImportSpec(7));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(PrepareImport(*p, std::nullopt).ok());
  fs::create_directories(p->output_dir + "/sub");
  std::ofstream(p->output_dir + "/dataset.json") << "{}";
  std::ofstream(p->output_dir + "/sub/shard") << "x";
  ASSERT_TRUE(PublishImport(*p).ok());
  EXPECT_FALSE(fs::exists(p->staging_dir));
  struct stat st {};
  ASSERT_EQ(::stat((p->final_dir + "/dataset.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  ASSERT_EQ(::stat(p->final_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // Published once: a second import of the same version is refused.
  EXPECT_EQ(PrepareImport(*p, std::nullopt).code(), common::Code::kAlreadyExists);

  // A symbolic link in the output is refused and nothing is published.
  auto q = ImportPathsFor(root, 3, ImportSpec(8));
  ASSERT_TRUE(PrepareImport(*q, std::nullopt).ok());
  fs::create_directories(q->output_dir);
  fs::create_symlink("/etc/passwd", q->output_dir + "/link");
  EXPECT_FALSE(PublishImport(*q).ok());
  EXPECT_FALSE(fs::exists(q->final_dir));
  DiscardImport(*q);
  EXPECT_FALSE(fs::exists(q->staging_dir));
  // Nothing written at all.
  auto r = ImportPathsFor(root, 3, ImportSpec(9));
  ASSERT_TRUE(PrepareImport(*r, std::nullopt).ok());
  EXPECT_FALSE(PublishImport(*r).ok());
  fs::remove_all(root);
}

struct Owner {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  unsigned mode = 0;
};
Owner OwnerOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {st.st_uid, st.st_gid, static_cast<unsigned>(st.st_mode & 07777)};
}

#define REQUIRE_ROOT()  \
  if (::geteuid() != 0) \
  GTEST_SKIP() << "needs root (giving directories to other ids); CI runs as root"

// The layout with the uid switch: the tenant's directory opens to its group only, the staging
// directory is the job uid's alone until it is sealed into a root-owned version.
TEST(DatasetImportTest, TenantDirectoryBelongsToTheTenantsGroup) {
  REQUIRE_ROOT();
  const std::string root = TempRoot();
  const JobCredentials job{400123, 400123, 10000003};
  auto p = ImportPathsFor(root, 3, ImportSpec(7));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(PrepareImport(*p, job).ok());
  Owner tenant = OwnerOf(p->tenant_dir);
  EXPECT_EQ(tenant.uid, 0u);
  EXPECT_EQ(tenant.gid, 10000003u);
  EXPECT_EQ(tenant.mode, 0750u);  // no write for the group, nothing for others
  Owner staging = OwnerOf(p->staging_dir);
  EXPECT_EQ(staging.uid, job.uid);
  EXPECT_EQ(staging.mode, 0700u);
  fs::create_directories(p->output_dir + "/sub");
  std::ofstream(p->output_dir + "/sub/shard") << "x";
  ASSERT_EQ(::chown(p->output_dir.c_str(), job.uid, job.gid), 0);
  ASSERT_EQ(::chown((p->output_dir + "/sub/shard").c_str(), job.uid, job.gid), 0);
  ASSERT_TRUE(PublishImport(*p).ok());
  Owner version = OwnerOf(p->final_dir);
  EXPECT_EQ(version.uid, 0u);
  EXPECT_EQ(version.gid, 0u);  // the tenant's group reaches it through the tenant directory only
  EXPECT_EQ(version.mode, 0755u);
  Owner shard = OwnerOf(p->final_dir + "/sub/shard");
  EXPECT_EQ(shard.uid, 0u);
  EXPECT_EQ(shard.mode, 0444u);
  EXPECT_EQ(OwnerOf(p->tenant_dir).mode, 0750u);
  fs::remove_all(root);
}

TEST(DatasetImportTest, AnEarlierAgentsTenantDirectoryIsFixedWhenTouched) {
  REQUIRE_ROOT();
  const std::string root = TempRoot();
  auto p = ImportPathsFor(root, 4, ImportSpec(1));
  ASSERT_TRUE(p.ok());
  // What agents made before tenants had groups: root's, readable by anyone.
  ASSERT_TRUE(common::MakeDirs(p->tenant_dir + "/dataset-0").ok());
  ASSERT_EQ(::chmod(p->tenant_dir.c_str(), 0755), 0);
  ASSERT_TRUE(PrepareImport(*p, JobCredentials{400124, 400124, 10000004}).ok());
  EXPECT_EQ(OwnerOf(p->tenant_dir).gid, 10000004u);
  EXPECT_EQ(OwnerOf(p->tenant_dir).mode, 0750u);
  EXPECT_TRUE(fs::exists(p->tenant_dir + "/dataset-0"));  // what it held stays

  // A symbolic link where the tenant's directory should be is refused, its target untouched.
  const std::string elsewhere = root + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0755), 0);
  fs::create_symlink(elsewhere, root + "/tenant-5");
  auto q = ImportPathsFor(root, 5, ImportSpec(2));
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(PrepareImport(*q, JobCredentials{400125, 400125, 10000005}).ok());
  EXPECT_EQ(OwnerOf(elsewhere).gid, 0u);
  EXPECT_EQ(OwnerOf(elsewhere).mode, 0755u);
  EXPECT_FALSE(fs::exists(elsewhere + "/.import-2"));
  fs::remove_all(root);
}

// Without the uid switch jobs run as the agent: no group, and a new tenant directory is the
// agent's alone.
TEST(DatasetImportTest, WithoutTheUidSwitchTheTenantDirectoryIsTheAgents) {
  const std::string root = TempRoot();
  auto p = ImportPathsFor(root, 6, ImportSpec(3));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(PrepareImport(*p, std::nullopt).ok());
  Owner tenant = OwnerOf(p->tenant_dir);
  EXPECT_EQ(tenant.uid, ::geteuid());
  EXPECT_EQ(tenant.mode, 0750u);
  fs::remove_all(root);
}

TEST(DatasetImportTest, AgentStartGivesEveryTenantDirectoryItsGroup) {
  REQUIRE_ROOT();
  const std::string root = TempRoot();
  ASSERT_EQ(::chmod(root.c_str(), 0777), 0);
  for (const char* d :
       {"/tenant-3/dataset-9", "/tenant-99", "/tenant-x", "/tenant-03", "/other", "/target"}) {
    ASSERT_TRUE(common::MakeDirs(root + d).ok());
  }
  for (const char* d :
       {"/tenant-3", "/tenant-99", "/tenant-x", "/tenant-03", "/other", "/target"}) {
    ASSERT_EQ(::chmod((root + d).c_str(), 0755), 0);
  }
  fs::create_symlink(root + "/target", root + "/tenant-4");
  SandboxOptions sandbox;
  sandbox.switch_uid = true;
  sandbox.tenant_gid_base = 10000000;
  sandbox.tenant_gid_count = 50;

  // Without the uid switch there is no group to give: nothing changes.
  SandboxOptions off = sandbox;
  off.switch_uid = false;
  ASSERT_TRUE(PrepareDatasetRoot(root, off).ok());
  EXPECT_EQ(OwnerOf(root).mode, 0777u);
  EXPECT_EQ(OwnerOf(root + "/tenant-3").mode, 0755u);

  ASSERT_TRUE(PrepareDatasetRoot(root, sandbox).ok());
  EXPECT_EQ(OwnerOf(root).mode, 0755u);  // no job can make a tenant's directory first
  Owner three = OwnerOf(root + "/tenant-3");
  EXPECT_EQ(three.gid, 10000003u);
  EXPECT_EQ(three.mode, 0750u);
  Owner past = OwnerOf(root + "/tenant-99");  // no group in range: the agent's alone
  EXPECT_EQ(past.uid, 0u);
  EXPECT_EQ(past.gid, ::getegid());
  EXPECT_EQ(past.mode, 0700u);
  EXPECT_EQ(OwnerOf(root + "/tenant-x").mode, 0755u);  // not a tenant's
  EXPECT_EQ(OwnerOf(root + "/tenant-03").gid, 0u);     // nor a name an agent writes
  EXPECT_EQ(OwnerOf(root + "/other").mode, 0755u);
  EXPECT_EQ(OwnerOf(root + "/target").mode, 0755u);  // the link was not followed
  EXPECT_EQ(OwnerOf(root + "/target").gid, 0u);
  EXPECT_EQ(OwnerOf(root + "/tenant-3/dataset-9").mode, 0755u);

  // A root that does not exist yet is made; an empty one means no datasets on this node.
  ASSERT_TRUE(PrepareDatasetRoot(root + "/new/root", sandbox).ok());
  EXPECT_TRUE(fs::is_directory(root + "/new/root"));
  EXPECT_TRUE(PrepareDatasetRoot("", sandbox).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace agent
