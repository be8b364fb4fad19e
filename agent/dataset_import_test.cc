// Import jobs on the agent: the argv embody-data gets, the paths under the dataset root, and the
// publish step that seals the output and refuses anything but plain files and directories.
#include "agent/dataset_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/mpi_launch.h"

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

}  // namespace
}  // namespace agent
