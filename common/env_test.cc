// One conformance suite for both Envs (the POSIX one in a fresh temp directory, and the
// in-memory twin): what an atomic file shows before and after Commit, what an abandoned one
// leaves, modes, rename, remove, list and mkdir -p. Then what only the disk can show: temp
// names and a secret's mode on disk.
#include "common/env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include <gtest/gtest.h>

#include "common/testing/memory_env.h"
#include "common/testing/temp_dir.h"

namespace common {
namespace {

struct EnvCase {
  const char* name;
  std::function<std::unique_ptr<Env>()> make;  // null Env: Env::Default()
};

class EnvTest : public ::testing::TestWithParam<EnvCase> {
 protected:
  void SetUp() override {
    owned_ = GetParam().make();
    env_ = owned_ ? owned_.get() : Env::Default();
    ASSERT_TRUE(env_->MakeDirs(dir_).ok());
  }

  testing::TempDir temp_{"embody-env"};
  const std::string dir_ = temp_.path();
  std::unique_ptr<Env> owned_;
  Env* env_ = nullptr;
};

TEST_P(EnvTest, AnAtomicFileAppearsOnlyWhenCommitted) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(env_->WriteFileAtomic(path, "old").ok());
  auto f = env_->NewAtomicFile(path, {});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE((*f)->Append("new ").ok());
  ASSERT_TRUE((*f)->Append(std::string("bytes")).ok());
  EXPECT_EQ((*f)->size(), 9u);
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ(*env_->ReadFile(path), "old");
  ASSERT_TRUE((*f)->Commit().ok());
  EXPECT_EQ(*env_->ReadFile(path), "new bytes");
  EXPECT_EQ((*f)->Commit().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*f)->Append("x").code(), Code::kFailedPrecondition);
  EXPECT_EQ(*env_->List(dir_), std::vector<std::string>{"f"});
}

TEST_P(EnvTest, AnAbandonedFileLeavesNothing) {
  for (TempName temp : {TempName::kHidden, TempName::kBeside}) {
    {
      AtomicFileOptions o;
      o.temp = temp;
      auto f = env_->NewAtomicFile(dir_ + "/gone", o);
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE((*f)->Append("partial").ok());
    }
    EXPECT_TRUE(env_->List(dir_)->empty());
    EXPECT_EQ(env_->ReadFile(dir_ + "/gone").status().code(), Code::kNotFound);
  }
}

TEST_P(EnvTest, WritesIntoAMissingDirectoryFail) {
  EXPECT_FALSE(env_->WriteFileAtomic(dir_ + "/no/such/f", "x").ok());
  EXPECT_EQ(env_->List(dir_ + "/no").status().code(), Code::kNotFound);
  ASSERT_TRUE(env_->MakeDirs(dir_ + "/no/such").ok());
  ASSERT_TRUE(env_->MakeDirs(dir_ + "/no/such").ok());  // again: fine
  EXPECT_TRUE(env_->WriteFileAtomic(dir_ + "/no/such/f", "x").ok());
  EXPECT_EQ(*env_->List(dir_), std::vector<std::string>{"no"});
}

TEST_P(EnvTest, RenameRemoveAndList) {
  ASSERT_TRUE(env_->WriteFileAtomic(dir_ + "/b", "2").ok());
  ASSERT_TRUE(env_->WriteFileAtomic(dir_ + "/a", "1").ok());
  EXPECT_EQ(*env_->List(dir_), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(env_->Rename(dir_ + "/a", dir_ + "/b").ok());  // replaces b
  EXPECT_EQ(*env_->ReadFile(dir_ + "/b"), "1");
  EXPECT_EQ(*env_->List(dir_), std::vector<std::string>{"b"});
  EXPECT_FALSE(env_->Rename(dir_ + "/a", dir_ + "/c").ok());
  ASSERT_TRUE(env_->Remove(dir_ + "/b").ok());
  ASSERT_TRUE(env_->Remove(dir_ + "/b").ok());  // missing already: fine
  EXPECT_TRUE(env_->List(dir_)->empty());
  EXPECT_TRUE(env_->SyncDir(dir_).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Envs, EnvTest,
    ::testing::Values(EnvCase{"posix", [] { return std::unique_ptr<Env>(); }},
                      EnvCase{"memory",
                              [] { return std::unique_ptr<Env>(new testing::MemoryEnv()); }}),
    [](const ::testing::TestParamInfo<EnvCase>& info) { return std::string(info.param.name); });

TEST(PosixEnvTest, TempNamesAndModesOnDisk) {
  testing::TempDir temp("embody-env");
  const std::string& dir = temp.path();
  Env* env = Env::Default();
  AtomicFileOptions beside;
  beside.temp = TempName::kBeside;
  auto f = env->NewAtomicFile(dir + "/shard", beside);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/shard.tmp"));
  auto g = env->NewAtomicFile(dir + "/ckpt", {});
  ASSERT_TRUE(g.ok());
  int hidden = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    hidden += e.path().filename().string().rfind(".tmp-", 0) == 0;
  }
  EXPECT_EQ(hidden, 1);
  const mode_t old_umask = ::umask(077);
  ASSERT_TRUE(env->WriteFileAtomic(dir + "/secret", "s", 0600).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir + "/shared", "s", 0644).ok());
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir + "/shared").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(MemoryEnvTest, KeepsTheModeAndTouchesNoDisk) {
  testing::MemoryEnv env;
  ASSERT_TRUE(env.MakeDirs("/nowhere/on/disk").ok());
  ASSERT_TRUE(env.WriteFileAtomic("/nowhere/on/disk/token", "s", 0600).ok());
  EXPECT_EQ(env.ModeOf("/nowhere/on/disk/token"), 0600);
  EXPECT_FALSE(std::filesystem::exists("/nowhere/on/disk"));
  EXPECT_EQ(*env.List("/nowhere"), std::vector<std::string>{"on"});
}

}  // namespace
}  // namespace common
