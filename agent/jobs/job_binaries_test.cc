#include "agent/jobs/job_binaries.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace agent {
namespace {

class JobBinariesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/job_binaries_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // An executable script at `path`, mode 0755.
  void MakeExecutable(const std::string& path) {
    ASSERT_TRUE(common::MakeDirs(std::filesystem::path(path).parent_path().string()).ok());
    std::ofstream(path) << "#!/bin/sh\necho hello\n";
    ::chmod(path.c_str(), 0755);
  }

  std::string root_;
};

TEST_F(JobBinariesTest, AReachableExecutableIsRunWhereItIs) {
  const std::string exe = root_ + "/pub/bin/embody-engine";
  MakeExecutable(exe);
  ::chmod((root_ + "/pub").c_str(), 0755);
  ::chmod((root_ + "/pub/bin").c_str(), 0755);
  EXPECT_TRUE(OthersCanExecute(exe));
  auto got = ExecutableForJobs(exe, root_ + "/data/bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, exe);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/data/bin"));
  EXPECT_TRUE(OthersCanExecute("embody-engine")) << "a bare name is found on PATH";
}

TEST_F(JobBinariesTest, OneBelowAPrivateDirectoryIsCopiedWhereJobsReachIt) {
  // As a clone in /root (0700) is: the file is 0755, a directory above is not passable.
  const std::string exe = root_ + "/private/repo/build/bin/embody-agent";
  MakeExecutable(exe);
  ::chmod((root_ + "/private").c_str(), 0700);
  EXPECT_FALSE(OthersCanExecute(exe));
  const std::string dir = root_ + "/data/bin";
  ASSERT_TRUE(common::MakeDirs(root_ + "/data").ok());
  ::chmod((root_ + "/data").c_str(), 0711);
  auto got = ExecutableForJobs(exe, dir);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, dir + "/embody-agent");
  EXPECT_TRUE(OthersCanExecute(*got));
  EXPECT_EQ(*common::ReadFile(*got), *common::ReadFile(exe));
  // Again (an agent restarted after a rebuild): replaced with the current file.
  std::ofstream(exe, std::ios::app) << "echo rebuilt\n";
  got = ExecutableForJobs(exe, dir);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*common::ReadFile(*got), *common::ReadFile(exe));
  EXPECT_FALSE(std::filesystem::exists(*got + ".tmp"));
}

TEST_F(JobBinariesTest, ACaFileJobsCannotReadIsCopiedReadableAndOneTheyCanIsLeft) {
  const std::string pub = root_ + "/etc/ca.pem";
  ASSERT_TRUE(common::MakeDirs(root_ + "/etc").ok());
  ::chmod((root_ + "/etc").c_str(), 0755);
  std::ofstream(pub) << "-----BEGIN CERTIFICATE-----\n";
  ::chmod(pub.c_str(), 0644);
  auto same = ReadableForJobs(pub, root_ + "/data/bin");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, pub);
  ::chmod(pub.c_str(), 0600);  // as a key-like file in /root would be
  auto copy = ReadableForJobs(pub, root_ + "/data/bin");
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  EXPECT_EQ(*copy, root_ + "/data/bin/ca.pem");
  struct stat st {};
  ASSERT_EQ(::stat(copy->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(*common::ReadFile(*copy), *common::ReadFile(pub));
  auto none = ReadableForJobs("", root_ + "/data/bin");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

TEST_F(JobBinariesTest, AFileOthersCannotExecuteIsCopiedAndOneMissingIsLeftAlone) {
  const std::string exe = root_ + "/bin/tool";
  MakeExecutable(exe);
  ::chmod(exe.c_str(), 0700);
  EXPECT_FALSE(OthersCanExecute(exe));
  auto got = ExecutableForJobs(exe, root_ + "/data/bin");
  ASSERT_TRUE(got.ok());
  struct stat st {};
  ASSERT_EQ(::stat(got->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  const std::string missing = root_ + "/private-none/embody-data";
  got = ExecutableForJobs(missing, root_ + "/data/bin");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, missing);
}

// The SDK's package below a private directory is copied where job uids read it; one they can read
// is used where it is; a directory without the package gives none.
TEST_F(JobBinariesTest, ThePythonSdkJobsCannotReadIsCopiedWhereTheyCan) {
  const std::string pub = root_ + "/pub/python";
  ASSERT_TRUE(common::MakeDirs(pub + "/embody").ok());
  std::ofstream(pub + "/embody/__init__.py") << "x = 1\n";
  std::ofstream(pub + "/embody/_report.py") << "y = 2\n";
  ::chmod((root_ + "/pub").c_str(), 0755);
  ::chmod(pub.c_str(), 0755);
  ::chmod((pub + "/embody").c_str(), 0755);
  ::chmod((pub + "/embody/__init__.py").c_str(), 0644);
  ::chmod((pub + "/embody/_report.py").c_str(), 0644);
  auto same = PythonPackageForJobs(pub, root_ + "/data/python");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, pub);

  ::chmod((root_ + "/pub").c_str(), 0700);
  auto copied = PythonPackageForJobs(pub, root_ + "/data/python");
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, root_ + "/data/python");
  for (const char* f : {"/embody/__init__.py", "/embody/_report.py"}) {
    struct stat st {};
    ASSERT_EQ(::stat((*copied + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0644u) << f;
  }
  EXPECT_EQ(*common::ReadFile(*copied + "/embody/_report.py"), "y = 2\n");

  auto none = PythonPackageForJobs(root_ + "/nothing", root_ + "/data/python2");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

}  // namespace
}  // namespace agent
