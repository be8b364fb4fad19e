// The agent's half of a registry pull: what it reads from the import job's spec, the skopeo
// command line it builds, and how a failing, hanging or cancelled skopeo ends (with a stand-in
// program for the last two, and the real skopeo, where installed, against a closed port).
// Pulling from a real registry is tests/e2e/byo_image_registry_test.cc.
#include "agent/data/registry_pull.h"

#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "agent/data/dataset_upload_fetch.h"
#include "agent/sandbox/sandbox.h"
#include "common/file_util.h"

namespace agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json PullSpec(const json& source) {
  return json{{"kind", "import"}, {"import", {{"dataset_id", 7}, {"source", source}}}};
}

const json kSource{{"format", "oci"},
                   {"registry", "local"},
                   {"reference", "embody/probe:1"},
                   {"registry_url", "http://127.0.0.1:5000"}};

class RegistryPullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("registry-pull-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // An executable script standing in for skopeo.
  std::string Script(const std::string& body) {
    const std::string path = (dir_ / "fake-skopeo").string();
    EXPECT_TRUE(common::WriteFileAtomic(path, "#!/bin/sh\n" + body + "\n", 0755).ok());
    return path;
  }
  fs::path dir_;
};

TEST_F(RegistryPullTest, TheSpecNamesTheRegistryAndTheReference) {
  EXPECT_TRUE(IsRegistryPull(PullSpec(kSource)));
  EXPECT_FALSE(IsRegistryPull(PullSpec({{"format", "oci"}, {"path", "/x.tar"}})));
  EXPECT_FALSE(IsRegistryPull(json{{"kind", "command"}}));
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->dataset_id, 7);
  EXPECT_EQ(p->registry.host, "127.0.0.1:5000");
  EXPECT_FALSE(p->registry.tls_verify);
  EXPECT_EQ(p->reference.ToString(), "embody/probe:1");
  // Whatever reached the agent is parsed again: no option, no other scheme.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"reference", "--src-creds=a:b"},
                                                        {"reference", "x:1 --debug"},
                                                        {"registry_url", "docker://evil"},
                                                        {"registry_url", "http://-h"}}) {
    json bad = kSource;
    bad[key] = value;
    EXPECT_FALSE(RegistryPullOf(PullSpec(bad)).ok()) << value;
  }
  json no_url = kSource;
  no_url.erase("registry_url");
  EXPECT_FALSE(RegistryPullOf(PullSpec(no_url)).ok());
  // Once pulled, the job reads the archive as it would an uploaded image tar.
  EXPECT_EQ(UploadFileName(PullSpec(kSource)), "upload.tar");
  const json copy = SpecReadingCopy(PullSpec(kSource), "/jobs/job-3/upload.tar");
  EXPECT_EQ(copy["import"]["source"],
            json({{"format", "oci"}, {"path", "/jobs/job-3/upload.tar"}}));
  EXPECT_FALSE(IsRegistryPull(copy));
}

TEST_F(RegistryPullTest, SkopeoIsToldEverythingAndTheImagesComeAfterTheOptions) {
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok());
  RegistryPullOptions o;
  o.arch = "arm64";
  o.timeout = std::chrono::seconds(60);
  auto argv = SkopeoPullArgv(o, *p, "/d/upload.tar", "/d/w");
  const std::vector<std::string> want{"skopeo",
                                      "--policy=/d/w/policy.json",
                                      "--registries.d=/d/w/registries.d",
                                      "--tmpdir=/d/w",
                                      "--override-os=linux",
                                      "--override-arch=arm64",
                                      "--command-timeout=60s",
                                      "copy",
                                      "--retry-times=2",
                                      "--src-tls-verify=false",
                                      "--src-no-creds",
                                      "--",
                                      "docker://127.0.0.1:5000/embody/probe:1",
                                      "oci-archive:/d/upload.tar"};
  EXPECT_EQ(argv, want);
  json https = kSource;
  https["registry_url"] = "https://registry.example.com";
  https["reference"] = "x@sha256:" + std::string(64, 'b');
  p = RegistryPullOf(PullSpec(https));
  ASSERT_TRUE(p.ok());
  o.auth_file = "/etc/embody/registry-auth.json";
  argv = SkopeoPullArgv(o, *p, "/d/upload.tar", "/d/w");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--src-tls-verify=true"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--src-authfile=/etc/embody/registry-auth.json"),
            argv.end());
  EXPECT_EQ(argv[argv.size() - 2],
            "docker://registry.example.com/x@sha256:" + std::string(64, 'b'));
  EXPECT_FALSE(NodeImageArchitecture().empty());
}

TEST_F(RegistryPullTest, AFailureCarriesSkopeosWordsAndLeavesNothing) {
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok());
  RegistryPullOptions o;
  // The environment it sees is the scrubbed one.
  o.skopeo = Script(
      "echo \"home=$HOME path=$PATH secret=$EMBODY_SECRET\" >&2\n"
      "echo 'manifest unknown' >&2; : > \"$HOME/image.tar\"; exit 1");
  ::setenv("EMBODY_SECRET", "leaked", 1);
  const std::string archive = (dir_ / "upload.tar").string();
  common::Status st = PullImage(o, *p, archive, nullptr);
  ::unsetenv("EMBODY_SECRET");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("manifest unknown"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("docker://127.0.0.1:5000/embody/probe:1"), std::string::npos);
  EXPECT_NE(st.message().find("path=/usr/bin:/bin"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("home=" + archive + ".skopeo"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("leaked"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(archive));
  EXPECT_FALSE(fs::exists(archive + ".skopeo"));
}

TEST_F(RegistryPullTest, APullWritingPastTheSizeLimitFailsAndLeavesNothing) {
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok());
  RegistryPullOptions o;
  o.max_file_bytes = 64 << 10;
  const std::string archive = (dir_ / "upload.tar").string();
  // A program that dies of SIGXFSZ at the limit, as C programs do.
  o.skopeo = Script("exec head -c 1048576 /dev/zero > \"$HOME/image.tar\"");
  common::Status st = PullImage(o, *p, archive, nullptr);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("limit of 65536 bytes"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(archive));
  EXPECT_FALSE(fs::exists(archive + ".skopeo"));
  // One that fails the write and says so, as Go programs (skopeo) do: the file still stops at
  // the limit.
  o.skopeo = Script(
      "dd if=/dev/zero of=\"$HOME/image.tar\" bs=4096 count=256 2>/dev/null\n"
      "s=$(stat -c %s \"$HOME/image.tar\"); echo \"size=$s: file too large\" >&2; exit 1");
  st = PullImage(o, *p, archive, nullptr);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("size=65536: file too large"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--image-pull-max-gib"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(archive));
}

TEST_F(RegistryPullTest, AHangingPullIsKilledAtItsDeadlineOrWhenStopped) {
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok());
  RegistryPullOptions o;
  o.skopeo = Script("sleep 600");
  o.timeout = std::chrono::seconds(1);
  const std::string archive = (dir_ / "upload.tar").string();
  const auto start = std::chrono::steady_clock::now();
  common::Status st = PullImage(o, *p, archive, nullptr);
  EXPECT_EQ(st.code(), common::Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("longer than 1 s"), std::string::npos) << st.message();
  o.timeout = std::chrono::seconds(600);
  std::atomic<int> polls{0};
  st = PullImage(o, *p, archive, [&] { return ++polls > 5; });
  EXPECT_NE(st.message().find("stopped"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_FALSE(fs::exists(archive));
}

TEST_F(RegistryPullTest, SkopeoRunsAsThePullsUidAndOnlyItsOwnFileBecomesTheArchive) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run skopeo as another uid";
  auto p = RegistryPullOf(PullSpec(kSource));
  ASSERT_TRUE(p.ok());
  const uid_t uid = 64125;
  RegistryPullOptions o;
  o.run_as = JobCredentials{uid, static_cast<gid_t>(uid), std::nullopt};
  // The operator's credentials, root's alone: skopeo reads the copy made for it.
  o.auth_file = (dir_ / "registry-auth.json").string();
  ASSERT_TRUE(common::WriteFileAtomic(o.auth_file, R"({"auths": {"marker": {}}})", 0600).ok());
  fs::permissions(dir_, fs::perms(0711));
  // skopeo's last argument is the archive it writes ("oci-archive:PATH").
  const std::string write_archive =
      "for a; do last=$a; case $a in --src-authfile=*) auth=${a#--src-authfile=};; esac; done\n"
      "out=${last#oci-archive:}\n";
  const std::string archive = (dir_ / "upload.tar").string();
  o.skopeo = Script(write_archive + "{ id -u; cat \"$auth\"; } > \"$out\"");
  common::Status st = PullImage(o, *p, archive, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto text = common::ReadFile(archive);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->substr(0, text->find('\n')), std::to_string(uid)) << *text;
  EXPECT_NE(text->find("marker"), std::string::npos) << *text;
  struct stat sb {};
  ASSERT_EQ(::lstat(archive.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_uid, 0u);
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(sb.st_nlink, 1u);
  EXPECT_FALSE(fs::exists(archive + ".skopeo"));
  fs::remove(archive);

  // A pull that hands over a link to a file of the node's, or leaves a process behind, gets
  // neither taken nor kept.
  o.skopeo = Script(write_archive + "ln -s /etc/passwd \"$out\"");
  st = PullImage(o, *p, archive, nullptr);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("no archive of its own"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(fs::symlink_status(archive)));
  o.skopeo = Script(write_archive + "setsid sleep 300 </dev/null >/dev/null 2>&1 &\n"
                    "id -u > \"$out\"");
  st = PullImage(o, *p, archive, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int i = 0; i < 100 && ProcessUids().count(uid) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ProcessUids().count(uid), 0u) << "a process of the pull's uid outlived it";
}

TEST_F(RegistryPullTest, RealSkopeoSaysWhyItCannotReachTheRegistry) {
  if (std::system("command -v skopeo >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "skopeo not installed (deploy/setup.sh installs it)";
  }
  // A port nothing listens on: bound, then closed.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  json source = kSource;
  source["registry_url"] = "http://127.0.0.1:" + std::to_string(port);
  auto p = RegistryPullOf(PullSpec(source));
  ASSERT_TRUE(p.ok());
  RegistryPullOptions o;
  o.timeout = std::chrono::seconds(120);
  const std::string archive = (dir_ / "upload.tar").string();
  common::Status st = PullImage(o, *p, archive, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("connection refused"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(archive));
}

}  // namespace
}  // namespace agent
