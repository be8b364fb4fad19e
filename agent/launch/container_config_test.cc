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

TEST(ContainerConfigTest, TheImagesEnvAndWorkingDirTravelInThePlanAndAreChecked) {
  ContainerPlan plan = Plan();
  auto image = ParseImageRunConfig(json::parse(R"({
      "architecture": "amd64",
      "config": {"Env": ["PATH=/opt/conda/bin:/usr/bin", "LANG=C.UTF-8"],
                 "WorkingDir": "/app/", "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["serve"]}})"));
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->env, (std::vector<std::string>{"PATH=/opt/conda/bin:/usr/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(image->working_dir, "/app");
  plan.image = *image;
  auto back = ParseContainerPlan(ToJson(plan));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->image.env, plan.image.env);
  EXPECT_EQ(back->image.working_dir, "/app");
  // A plan written without the block (an image that sets nothing) still reads.
  json old = ToJson(Plan());
  old.erase("image");
  ASSERT_TRUE(ParseContainerPlan(old).ok());

  // An image that sets nothing, or null fields, as some builders write them.
  for (const char* none : {R"({})", R"({"config": null})", R"({"config": {"Env": null}})",
                           R"({"config": {"WorkingDir": ""}})"}) {
    auto r = ParseImageRunConfig(json::parse(none));
    ASSERT_TRUE(r.ok()) << none << ": " << r.status().message();
    EXPECT_TRUE(r->env.empty());
    EXPECT_EQ(r->working_dir, "");
  }
  // What cannot be a variable or a directory is refused, naming it.
  for (const char* bad :
       {R"({"config": {"Env": ["NOEQUALS"]}})", R"({"config": {"Env": ["=x"]}})",
        R"({"config": {"Env": ["1A=x"]}})", R"({"config": {"Env": ["A B=x"]}})",
        R"({"config": {"Env": [7]}})", R"({"config": {"Env": "A=b"}})",
        R"({"config": {"WorkingDir": "app"}})", R"({"config": {"WorkingDir": "/a/../etc"}})",
        R"({"config": {"WorkingDir": 3}})", R"({"config": []})", R"([])"}) {
    EXPECT_FALSE(ParseImageRunConfig(json::parse(bad)).ok()) << bad;
  }
  json many = json::array();
  for (int i = 0; i < 1025; ++i) many.push_back("V" + std::to_string(i) + "=1");
  EXPECT_FALSE(ParseImageRunConfig(json{{"config", {{"Env", many}}}}).ok());
  EXPECT_FALSE(
      ParseImageRunConfig(json{{"config", {{"Env", {"A=" + std::string(40000, 'x')}}}}}).ok());
  EXPECT_FALSE(ParseImageRunConfig(json{{"config", {{"Env", {std::string("A=b\0c", 5)}}}}}).ok());
  // A tampered command file is refused the same way.
  json tampered = ToJson(plan);
  tampered["image"]["env"] = {"BAD KEY=1"};
  EXPECT_FALSE(ParseContainerPlan(tampered).ok());
}

TEST(ContainerConfigTest, TheRanksVariablesGoOverTheImagesButItsPathsWin) {
  const std::vector<std::string> image{"PATH=/opt/conda/bin:/usr/bin", "LANG=C.UTF-8",
                                       "PYTHONPATH=/app/lib", "LD_LIBRARY_PATH=/opt/lib",
                                       "RANK=99", "LANG=en_US.UTF-8"};
  const std::vector<std::string> rank{"PATH=/usr/local/bin:/usr/bin:/bin", "RANK=1",
                                      "PYTHONPATH=/opt/embody/sdk", "HOME=/jobs/job-7",
                                      "LD_LIBRARY_PATH=/host/lib", "EMBODY_JOB_ID=7"};
  EXPECT_EQ(MergeImageEnvironment(image, rank),
            (std::vector<std::string>{"PATH=/opt/conda/bin:/usr/bin", "LANG=en_US.UTF-8",
                                      "PYTHONPATH=/opt/embody/sdk:/app/lib",
                                      "LD_LIBRARY_PATH=/opt/lib", "RANK=1", "HOME=/jobs/job-7",
                                      "EMBODY_JOB_ID=7"}));
  // An image without PATH runs with the rank's; without an image, the rank's variables as they are.
  EXPECT_EQ(MergeImageEnvironment({"A=1"}, {"PATH=/usr/bin", "PYTHONPATH=/sdk"}),
            (std::vector<std::string>{"A=1", "PATH=/usr/bin", "PYTHONPATH=/sdk"}));
  EXPECT_EQ(MergeImageEnvironment({}, rank), rank);
  EXPECT_EQ(MergeImageEnvironment({"PYTHONPATH=/app"}, {"PYTHONPATH="}),
            (std::vector<std::string>{"PYTHONPATH=/app"}));
}

TEST(ContainerConfigTest, ARankStartsInTheImagesWorkingDirElseWhereItWasStarted) {
  ContainerPlan plan = Plan();
  EXPECT_EQ(ContainerWorkingDir(plan, "/var/lib/embody/jobs/job-7/sub", "/home/x"),
            "/var/lib/embody/jobs/job-7/sub");
  EXPECT_EQ(ContainerWorkingDir(plan, "/elsewhere", "/var/lib/embody/jobs/job-7"),
            "/var/lib/embody/jobs/job-7");
  EXPECT_EQ(ContainerWorkingDir(plan, "/etc/embody/ca.pem", "/h"), "/h");  // a file bind
  plan.image.working_dir = "/app";
  EXPECT_EQ(ContainerWorkingDir(plan, "/var/lib/embody/jobs/job-7", "/h"), "/app");
}

}  // namespace
}  // namespace agent
