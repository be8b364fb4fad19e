#include "cli/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/file_util.h"

namespace cli {
namespace {

TEST(ConfigTest, ParsesSourceableEnvFile) {
  auto kv = ParseEnvFile(
      "# comment\nexport EMBODY_URL=http://127.0.0.1:8080\nEMBODY_TOKEN='abc'\n  X=\"q\"\nbad\n");
  EXPECT_EQ(kv["EMBODY_URL"], "http://127.0.0.1:8080");
  EXPECT_EQ(kv["EMBODY_TOKEN"], "abc");
  EXPECT_EQ(kv["X"], "q");
  EXPECT_EQ(kv.count("bad"), 0u);
}

TEST(ConfigTest, EnvironmentWinsThenHomeFile) {
  auto dir = std::filesystem::temp_directory_path() / ("embody_cfg_" + std::to_string(getpid()));
  ASSERT_TRUE(common::MakeDirs(dir.string()).ok());
  ASSERT_TRUE(common::WriteFileAtomic((dir / "env").string(),
                                      "export EMBODY_URL=http://h:1/\nexport EMBODY_TOKEN=t1\n")
                  .ok());
  ::setenv("EMBODY_HOME", dir.c_str(), 1);
  ::unsetenv("EMBODY_URL");
  ::unsetenv("EMBODY_TOKEN");
  auto c = LoadConfig();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->url, "http://h:1");
  EXPECT_EQ(c->token, "t1");
  ::setenv("EMBODY_TOKEN", "t2", 1);
  c = LoadConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token, "t2");
  ::unsetenv("EMBODY_TOKEN");
  ::setenv("EMBODY_HOME", (dir / "missing").c_str(), 1);
  EXPECT_FALSE(LoadConfig().ok());
  ::unsetenv("EMBODY_HOME");
  std::filesystem::remove_all(dir);
}

TEST(ConfigTest, CaFileComesFromTheEnvironmentOrTheEnvFile) {
  auto dir = std::filesystem::temp_directory_path() / ("embody_cfg_ca_" + std::to_string(getpid()));
  ASSERT_TRUE(common::MakeDirs(dir.string()).ok());
  ASSERT_TRUE(common::WriteFileAtomic((dir / "env").string(),
                                      "export EMBODY_URL=https://h:1\nexport EMBODY_TOKEN=t1\n"
                                      "export EMBODY_CA_FILE=/etc/embody/ca.pem\n")
                  .ok());
  ::setenv("EMBODY_HOME", dir.c_str(), 1);
  ::unsetenv("EMBODY_URL");
  ::unsetenv("EMBODY_TOKEN");
  ::unsetenv("EMBODY_CA_FILE");
  auto c = LoadConfig();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ca_file, "/etc/embody/ca.pem");
  ::setenv("EMBODY_CA_FILE", "/home/me/ca.pem", 1);
  c = LoadConfig();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ca_file, "/home/me/ca.pem");
  ::unsetenv("EMBODY_CA_FILE");
  ::unsetenv("EMBODY_HOME");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cli
