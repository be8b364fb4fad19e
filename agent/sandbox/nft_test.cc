// Running nft through a program: its exit and message come back, a missing program says so, and
// a script reaches its standard input whole. (The library path runs against the kernel in
// job_network_netns_test.cc.)
#include "agent/sandbox/nft.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/testing/temp_dir.h"

namespace agent {
namespace {

std::string Script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/fake-nft";
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(NftTest, AProgramGetsTheScriptOnItsStandardInputAndItsArguments) {
  common::testing::TempDir dir;
  Nft nft(Script(dir.path(), "echo \"args: $*\"; cat\n"));
  EXPECT_FALSE(nft.in_process());
  std::string script(200000, 'x');  // larger than a pipe's buffer
  script += "\nend\n";
  auto ran = nft.Run(script, /*json=*/true);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->first, 0);
  EXPECT_EQ(ran->second, "args: -j -f -\n" + script);
}

TEST(NftTest, AFailingProgramsMessageIsTheError) {
  common::testing::TempDir dir;
  Nft nft(Script(dir.path(), "echo 'Error: Could not process rule: No such file' >&2; exit 1\n"));
  common::Status st = nft.Apply("add rule inet t nosuch accept\n");
  EXPECT_EQ(st.code(), common::Code::kInternal);
  EXPECT_NE(st.message().find("Could not process rule: No such file"), std::string::npos)
      << st.message();
}

TEST(NftTest, AMissingProgramIsNamed) {
  common::testing::TempDir dir;
  Nft nft(dir.path() + "/no-nft");
  common::Status st = nft.Apply("list tables\n");
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("no-nft"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace agent
