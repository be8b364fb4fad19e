// The node's image cache with the real umoci, on an image built here offline (the static
// embody-image-probe in an otherwise empty image), and one rank run in it with the real crun as
// an unprivileged uid. Skipped, saying so, without crun and umoci (deploy/setup.sh installs
// both).
#include "agent/images/image_cache.h"

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/launch/container_exec.h"
#include "agent/rsh/rsh_bridge.h"
#include "agent/testing/oci_image.h"
#include "common/crypto.h"
#include "common/file_util.h"

namespace agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ImageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveCrunAndUmoci()) GTEST_SKIP() << "crun or umoci not installed";
    root_ = fs::temp_directory_path() /
            ("image_cache_test." + std::to_string(::getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    ASSERT_NO_FATAL_FAILURE(Layout("", "/bin/probe", &layout_, &digest_));
  }
  // An image holding the probe at `path`, built and unpacked under root_ as an OCI layout.
  void Layout(const std::string& suffix, const std::string& path, std::string* layout,
              std::string* digest, const std::vector<std::string>& config = {}) {
    auto tar = testing::BuildOciImageTar((root_ / ("build" + suffix)).string(),
                                         {{EMBODY_IMAGE_PROBE, path}}, config);
    ASSERT_TRUE(tar.ok()) << tar.status().message();
    *layout = (root_ / ("layout" + suffix)).string();
    fs::create_directories(*layout);
    ASSERT_EQ(std::system(("tar -xf " + *tar + " -C " + *layout).c_str()), 0);
    *digest = json::parse(*common::ReadFile(*layout + "/index.json"))["manifests"][0]["digest"];
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::unique_ptr<ImageCache> Open(int64_t max_bytes = int64_t{1} << 30) {
    ImageCacheOptions o;
    o.dir = (root_ / "images").string();
    o.max_bytes = max_bytes;
    auto cache = ImageCache::Open(o);
    EXPECT_TRUE(cache.ok()) << cache.status().message();
    return cache.ok() ? std::move(*cache) : nullptr;
  }

  // A plan for `rootfs` with the job directory root_/job (the uid's) bound writable and a copy of
  // the container init the job's uid can reach, as the agent's data directory holds it.
  ContainerPlan RankPlan(const std::string& rootfs, uid_t uid) {
    const std::string job_dir = (root_ / "job").string();
    fs::create_directories(job_dir);
    EXPECT_EQ(::chown(job_dir.c_str(), uid, uid), 0);
    fs::permissions(root_, fs::perms(0711));
    fs::permissions(root_ / "images", fs::perms(0711));
    ContainerPlan plan;
    plan.rootfs = rootfs;
    plan.binds = {{job_dir, false}};
    plan.init = (root_ / "embody-container-init").string();
    fs::copy_file(EMBODY_CONTAINER_INIT, plan.init, fs::copy_options::overwrite_existing);
    fs::permissions(plan.init, fs::perms(0755));
    return plan;
  }
  // Runs `argv` in the image of `plan` as `uid`, from the job directory, with `env` set over this
  // process's environment; its output, and whether it exited 0 (the wait status otherwise).
  std::pair<int, std::string> RunRank(const ContainerPlan& plan, uid_t uid,
                                      const std::vector<std::pair<std::string, std::string>>& env,
                                      const std::vector<std::string>& argv) {
    const std::string job_dir = plan.binds[0].path;
    const std::string out = job_dir + "/out.txt";
    const pid_t pid = ::fork();
    if (pid == 0) {
      FILE* f = std::fopen(out.c_str(), "w");
      if (f == nullptr) ::_exit(90);
      ::dup2(fileno(f), 1);
      ::dup2(fileno(f), 2);
      if (::fchown(fileno(f), uid, uid) != 0) ::_exit(91);
      if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(92);
      ::setenv("HOME", job_dir.c_str(), 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      if (::chdir(job_dir.c_str()) != 0) ::_exit(93);
      std::string err = ExecInContainer(plan, argv);
      std::fprintf(stderr, "%s\n", err.c_str());
      ::_exit(94);
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    auto read = common::ReadFile(out);
    return {WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : (status == 0 ? -1 : status),
            read.ok() ? *read : ""};
  }

  fs::path root_;
  std::string layout_, digest_;
};

TEST_F(ImageCacheTest, UnpacksOnceAndSharesTheRootFileSystem) {
  auto cache = Open();
  std::unique_ptr<ImageUse> a, b;
  // Two jobs at once: one unpack, one directory.
  std::thread t([&] {
    auto u = cache->Acquire(digest_, layout_);
    ASSERT_TRUE(u.ok()) << u.status().message();
    a = std::move(*u);
  });
  auto u = cache->Acquire(digest_, layout_);
  ASSERT_TRUE(u.ok()) << u.status().message();
  b = std::move(*u);
  t.join();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rootfs(), b->rootfs());
  EXPECT_TRUE(fs::is_regular_file(fs::path(a->rootfs()) / "bin" / "probe"));
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest_});
  EXPECT_GT(cache->bytes(), 0);
  // Only the root file system stays: no blobs, no temporaries.
  size_t names = 0;
  for (const auto& e : fs::directory_iterator(root_ / "images")) {
    ++names;
    EXPECT_EQ(e.path().filename().string(), digest_.substr(7));
  }
  EXPECT_EQ(names, 1u);
  // A restarted agent adopts it.
  a.reset();
  b.reset();
  cache.reset();
  EXPECT_EQ(Open()->Entries(), std::vector<std::string>{digest_});
}

TEST_F(ImageCacheTest, ADamagedBlobOrAWrongDigestIsRefusedAndLeavesNothing) {
  auto cache = Open();
  EXPECT_FALSE(cache->Acquire("sha256:" + std::string(64, 'a'), layout_).ok());
  // Flip the content of the largest blob (the layer).
  fs::path largest;
  for (const auto& e : fs::directory_iterator(fs::path(layout_) / "blobs" / "sha256")) {
    if (largest.empty() || fs::file_size(e.path()) > fs::file_size(largest)) largest = e.path();
  }
  const auto size = fs::file_size(largest);
  { std::ofstream(largest, std::ios::binary) << std::string(size, 'x'); }
  auto bad = cache->Acquire(digest_, layout_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not hash to its digest"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(fs::is_empty(root_ / "images"));
  EXPECT_TRUE(cache->Entries().empty());
}

TEST_F(ImageCacheTest, EvictsTheLeastRecentlyUsedImageNoJobHolds) {
  // A second image, with other contents.
  std::string layout2, digest2;
  ASSERT_NO_FATAL_FAILURE(Layout("2", "/bin/other", &layout2, &digest2));
  ASSERT_NE(digest2, digest_);

  int64_t one = 0;
  {
    auto probe = Open();
    ASSERT_TRUE(probe->Acquire(digest_, layout_).ok());
    one = probe->bytes();
  }
  fs::remove_all(root_ / "images");
  auto cache = Open(one + one / 2);  // room for one image
  auto first = cache->Acquire(digest_, layout_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = cache->Acquire(digest2, layout2);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(cache->Entries().size(), 2u);  // both held: kept although over the size
  first->reset();  // the least recently used, now held by nobody
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest2});
  EXPECT_FALSE(fs::exists(root_ / "images" / digest_.substr(7)));
  second->reset();
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest2});  // within the size: kept
}

// A node holding part of a multi-node image job (agent/rsh/rsh_bridge.h): its assignment starts the
// unpack at once, ImageReady says when it is done (or why it cannot be), and the image is held
// while the assignment lasts, not longer.
TEST_F(ImageCacheTest, AWorkerPartPreparesTheImageAndHoldsItWhileAssigned) {
  // A second image, and a cache with room for one.
  std::string layout2, digest2;
  ASSERT_NO_FATAL_FAILURE(Layout("2", "/bin/other", &layout2, &digest2));
  int64_t one = 0;
  {
    auto probe = Open();
    ASSERT_TRUE(probe->Acquire(digest_, layout_).ok());
    one = probe->bytes();
  }
  fs::remove_all(root_ / "images");
  auto cache = Open(one + one / 2);
  RshBridgeOptions o;
  o.jobs.data_dir = (root_ / "data").string();
  o.jobs.sandbox.switch_uid = false;
  o.images = cache.get();
  o.container_init = EMBODY_CONTAINER_INIT;
  UidPool uids(o.jobs.sandbox);
  RankLogs logs;
  RshBridge bridge(o, &uids, &logs);
  auto worker = [&](int64_t job_id, const std::string& digest) {
    api::Command w;
    w.type = api::Command::Type::kWorker;
    w.job_id = job_id;
    w.tenant_id = 1;
    w.spec = {{"kind", "command"},
              {"command", {"/bin/probe"}},
              {"environment",
               {{"image", {{"name", "probe@1"}, {"path", layout_}, {"digest", digest}}}}}};
    w.job_token_sha256 = common::Sha256Hex("token-" + std::to_string(job_id));
    w.hosts = {{2, "b", "127.0.0.1", 1, "http://127.0.0.1:1"}};
    return w;
  };
  auto ready = [&](int64_t job_id) {
    common::Result<bool> r = false;
    for (int i = 0; i < 600; ++i) {
      r = bridge.ImageReady(job_id, "Bearer token-" + std::to_string(job_id));
      if (!r.ok() || *r) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return r;
  };
  // A manifest digest the layout does not hold: not preparable, and the reason says which image.
  bridge.SetAssignments({worker(7, digest_), worker(8, "sha256:" + std::string(64, 'a'))});
  auto seven = ready(7);
  ASSERT_TRUE(seven.ok()) << seven.status().message();
  EXPECT_TRUE(*seven);
  auto eight = ready(8);
  EXPECT_EQ(eight.status().code(), common::Code::kFailedPrecondition);
  EXPECT_NE(eight.status().message().find("cannot prepare image probe@1"), std::string::npos)
      << eight.status().message();
  // Held by the assignment: another image past the cache's size does not push it out, also
  // after the same attempt is sent again in full (one unpack, one hold).
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest_});
  bridge.SetAssignments({worker(7, digest_)});
  EXPECT_TRUE(*bridge.ImageReady(7, "Bearer token-7"));
  ASSERT_TRUE(cache->Acquire(digest2, layout2).ok());
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest_});
  // The end of the assignment lets it go: the next image in pushes it out.
  bridge.SetAssignments({});
  ASSERT_TRUE(cache->Acquire(digest2, layout2).ok());
  EXPECT_EQ(cache->Entries(), std::vector<std::string>{digest2});
}

TEST_F(ImageCacheTest, MountPointsAreMadeWithoutFollowingTheImagesLinks) {
  auto cache = Open();
  auto use = cache->Acquire(digest_, layout_);
  ASSERT_TRUE(use.ok()) << use.status().message();
  const std::string rootfs = (*use)->rootfs();
  ASSERT_TRUE(cache->EnsureMountpoints(rootfs, {"/srv/jobs/job-1"}, {"/opt/init"}).ok());
  EXPECT_TRUE(fs::is_directory(rootfs + "/srv/jobs/job-1"));
  EXPECT_TRUE(fs::is_regular_file(rootfs + "/opt/init"));
  EXPECT_TRUE(fs::is_directory(rootfs + "/proc"));
  // An image whose /data is a link out of its root: refused, nothing made through it.
  fs::create_directory_symlink(root_ / "outside", rootfs + "/data");
  fs::create_directories(root_ / "outside");
  auto st = cache->EnsureMountpoints(rootfs, {"/data/x"}, {});
  EXPECT_NE(st.message().find("symbolic link at /data"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_empty(root_ / "outside"));
}

// One rank through ExecInContainer as an unprivileged uid: the real crun, the image's root, the
// job's uid inside, its directory writable, the root file system not.
TEST_F(ImageCacheTest, ARankRunsInTheImageAsItsOwnUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to a job uid";
  auto cache = Open();
  auto use = cache->Acquire(digest_, layout_);
  ASSERT_TRUE(use.ok()) << use.status().message();
  const uid_t uid = 64123;
  ContainerPlan plan = RankPlan((*use)->rootfs(), uid);
  const std::string job_dir = plan.binds[0].path, out = job_dir + "/out.txt";
  ASSERT_TRUE(cache->EnsureMountpoints(plan.rootfs, {job_dir}, {plan.init}).ok());
  auto [status, text] =
      RunRank(plan, uid, {{"RANK", "0"}},
              {"/bin/probe", "report", "/bin/probe", "/etc/debian_version", out});
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("uid=64123\n"), std::string::npos) << text;
  EXPECT_NE(text.find("exists /bin/probe=1"), std::string::npos) << text;
  // The host's files are not there, the job's directory is: the root is the image's.
  EXPECT_NE(text.find("exists /etc/debian_version=0"), std::string::npos) << text;
  EXPECT_NE(text.find("exists " + out + "=1"), std::string::npos) << text;
  EXPECT_NE(text.find("home_writable=1"), std::string::npos) << text;
  EXPECT_NE(text.find("root_writable=0"), std::string::npos) << text;
  EXPECT_NE(text.find("RANK=0"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(job_dir + "/written-in-image"));
}

TEST_F(ImageCacheTest, TheImagesEnvAndWorkingDirAreKeptWithItsEntry) {
  std::string layout, digest;
  ASSERT_NO_FATAL_FAILURE(Layout("-conf", "/bin/probe", &layout, &digest,
                                 {"--config.env=IMAGE_GREETING=hello from the image",
                                  "--config.env=PATH=/opt/tools/bin:/bin",
                                  "--config.workingdir=/srv/app"}));
  {
    auto cache = Open();
    auto use = cache->Acquire(digest, layout);
    ASSERT_TRUE(use.ok()) << use.status().message();
    const ImageRunConfig& c = (*use)->config();
    EXPECT_NE(std::find(c.env.begin(), c.env.end(), "IMAGE_GREETING=hello from the image"),
              c.env.end());
    EXPECT_NE(std::find(c.env.begin(), c.env.end(), "PATH=/opt/tools/bin:/bin"), c.env.end());
    EXPECT_EQ(c.working_dir, "/srv/app");
  }
  // A restarted agent reads it back with the entry.
  const fs::path entry = root_ / "images" / digest.substr(7);
  ASSERT_TRUE(fs::is_regular_file(entry / "image.json"));
  {
    auto cache = Open();
    ASSERT_EQ(cache->Entries(), std::vector<std::string>{digest});
    auto use = cache->Acquire(digest, layout);
    ASSERT_TRUE(use.ok());
    EXPECT_EQ((*use)->config().working_dir, "/srv/app");
  }
  // An entry whose image.json is gone or damaged is not adopted: it is made again when used.
  for (const char* damage : {"", "{\"env\": [\"BAD KEY=1\"], \"working_dir\": \"\"}"}) {
    if (*damage == '\0') {
      fs::remove(entry / "image.json");
    } else {
      std::ofstream(entry / "image.json") << damage;
    }
    auto cache = Open();
    EXPECT_TRUE(cache->Entries().empty()) << damage;
    EXPECT_FALSE(fs::exists(entry));
    auto use = cache->Acquire(digest, layout);
    ASSERT_TRUE(use.ok()) << use.status().message();
    EXPECT_EQ((*use)->config().working_dir, "/srv/app");
  }
}

TEST_F(ImageCacheTest, ARankRunsWithTheImagesEnvInItsWorkingDir) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to a job uid";
  std::string layout, digest;
  ASSERT_NO_FATAL_FAILURE(Layout("-conf", "/bin/probe", &layout, &digest,
                                 {"--config.env=IMAGE_GREETING=hello", "--config.env=PATH=/bin",
                                  "--config.workingdir=/srv/app"}));
  auto cache = Open();
  auto use = cache->Acquire(digest, layout);
  ASSERT_TRUE(use.ok()) << use.status().message();
  const uid_t uid = 64124;
  ContainerPlan plan = RankPlan((*use)->rootfs(), uid);
  plan.image = (*use)->config();
  // The agent's path: the mount points of the command file's block, the WorkingDir with them.
  ASSERT_FALSE(fs::exists(plan.rootfs + "/srv/app"));
  const common::Status made =
      cache->EnsureContainerMountpoints(json{{"container", ToJson(plan)}}.dump(), {});
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_TRUE(fs::is_directory(plan.rootfs + "/srv/app"));
  // "probe" is found through the image's PATH, inside the image; the rank's own variables go
  // over the image's, its PATH does not (crun is found on it).
  auto [status, text] = RunRank(plan, uid,
                                {{"RANK", "3"},
                                 {"IMAGE_GREETING", "overridden by the rank"},
                                 {"PATH", "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}},
                                {"probe", "report"});
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("cwd=/srv/app\n"), std::string::npos) << text;
  EXPECT_NE(text.find("PATH=/bin\n"), std::string::npos) << text;
  EXPECT_NE(text.find("IMAGE_GREETING=overridden by the rank\n"), std::string::npos) << text;
  EXPECT_NE(text.find("RANK=3\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace agent
