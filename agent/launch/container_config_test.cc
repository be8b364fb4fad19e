// config.json for one rank of an image job, and the command file's "container" block.
#include "agent/launch/container_config.h"

#include <gtest/gtest.h>

namespace agent {
namespace {

using nlohmann::json;

ContainerPlan Plan() {
  ContainerPlan plan;
  plan.rootfs = "/var/lib/embody/images/abc/rootfs";
  plan.init = "/usr/bin/embody-container-init";
  plan.binds = {{"/var/lib/embody/jobs/job-7", false},
                {"/srv/datasets/tenant-1/dataset-3", true},
                {"/etc/embody/ca.pem", true, true}};
  return plan;
}

const json* MountAt(const json& config, const std::string& dest) {
  for (const auto& m : config["mounts"]) {
    if (m["destination"] == dest) return &m;
  }
  return nullptr;
}

TEST(ContainerConfigTest, TheRankRunsAsTheJobsUidWithNoCapabilitiesOnTheHostsNetwork) {
  ContainerProcess p;
  p.args = {"python3", "train.py"};
  p.env = {"RANK=3", "MASTER_ADDR=10.0.0.1"};
  p.cwd = "/var/lib/embody/jobs/job-7";
  p.uid = 200007;
  p.gid = 200007;
  p.hostname = "node-a";
  const json c = OciRuntimeConfig(Plan(), p);
  EXPECT_EQ(c["process"]["user"], json({{"uid", 200007}, {"gid", 200007}}));
  // The init forwards signals to the command (a PID 1 ignores those it has no handler for).
  EXPECT_EQ(c["process"]["args"],
            json({"/usr/bin/embody-container-init", "--", "python3", "train.py"}));
  EXPECT_EQ(c["process"]["env"], json({"RANK=3", "MASTER_ADDR=10.0.0.1"}));
  EXPECT_EQ(c["process"]["cwd"], "/var/lib/embody/jobs/job-7");
  EXPECT_TRUE(c["process"]["noNewPrivileges"]);
  for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"}) {
    EXPECT_EQ(c["process"]["capabilities"][set], json::array()) << set;
  }
  EXPECT_EQ(c["root"], json({{"path", "/var/lib/embody/images/abc/rootfs"}, {"readonly", true}}));
  EXPECT_EQ(c["hostname"], "node-a");
  std::vector<std::string> types;
  for (const auto& ns : c["linux"]["namespaces"]) types.push_back(ns["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"pid", "ipc", "uts", "mount", "user"}));
  // The user namespace maps the job's ids to themselves, nothing else (no root inside).
  EXPECT_EQ(c["linux"]["uidMappings"],
            json::array({{{"containerID", 200007}, {"hostID", 200007}, {"size", 1}}}));
  EXPECT_EQ(c["linux"]["gidMappings"],
            json::array({{{"containerID", 200007}, {"hostID", 200007}, {"size", 1}}}));
  EXPECT_FALSE(c["linux"].contains("resources"));  // the rank's cgroup holds the limits
  EXPECT_FALSE(c["linux"].contains("cgroupsPath"));
}

TEST(ContainerConfigTest, TheJobsPathsAreBoundWhereTheHostHasThemAndOnlyTheJobDirIsWritable) {
  const json c = OciRuntimeConfig(Plan(), ContainerProcess{});
  const json* job = MountAt(c, "/var/lib/embody/jobs/job-7");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ((*job)["source"], "/var/lib/embody/jobs/job-7");
  EXPECT_EQ((*job)["options"], json({"rbind", "rw", "nosuid", "nodev"}));
  const json* data = MountAt(c, "/srv/datasets/tenant-1/dataset-3");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ((*data)["options"][1], "ro");
  ASSERT_NE(MountAt(c, "/etc/embody/ca.pem"), nullptr);
  const json* init = MountAt(c, "/usr/bin/embody-container-init");
  ASSERT_NE(init, nullptr);
  EXPECT_EQ((*init)["options"][1], "ro");
  EXPECT_EQ((*MountAt(c, "/proc"))["type"], "proc");
  EXPECT_EQ((*MountAt(c, "/tmp"))["type"], "tmpfs");
  EXPECT_EQ((*MountAt(c, "/dev/shm"))["type"], "tmpfs");
  EXPECT_EQ((*MountAt(c, "/sys"))["options"][1], "ro");
  // /tmp comes before any bind below it, so crun makes their mount points in the tmpfs.
  size_t tmp = 0, job_at = 0;
  for (size_t i = 0; i < c["mounts"].size(); ++i) {
    if (c["mounts"][i]["destination"] == "/tmp") tmp = i;
    if (c["mounts"][i]["destination"] == "/var/lib/embody/jobs/job-7") job_at = i;
  }
  EXPECT_LT(tmp, job_at);
}

TEST(ContainerConfigTest, ThePlanRoundTripsAndRefusesPathsThatWalk) {
  auto back = ParseContainerPlan(ToJson(Plan()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ToJson(*back), ToJson(Plan()));
  EXPECT_TRUE(back->binds[2].is_file);
  for (const std::string& bad : {"", "rel/x", "/a/../b", "/a/./b", "/"}) {
    json j = ToJson(Plan());
    j["binds"][0]["path"] = bad;
    EXPECT_FALSE(ParseContainerPlan(j).ok()) << bad;
  }
  json j = ToJson(Plan());
  j["rootfs"] = "/x/../y";
  EXPECT_FALSE(ParseContainerPlan(j).ok());
  EXPECT_FALSE(ParseContainerPlan(json::array()).ok());
}

}  // namespace
}  // namespace agent
