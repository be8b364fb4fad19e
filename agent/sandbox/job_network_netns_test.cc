// Job network confinement against the kernel: the agent's nft table applied in a network
// namespace of the test's own (tests/support/netns.h: two namespaces on a bridge; the job's node
// is one, a peer node the other, the bridge a machine that is no peer), with processes of job uids
// connecting to what a job may and may not reach. Needs root, `ip netns` and nft; skipped, saying
// which is missing, elsewhere.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/sandbox/job_network.h"
#include "tests/support/netns.h"

namespace agent {
namespace {

using Clock = std::chrono::steady_clock;

// A listening TCP socket on `address` (port chosen by the kernel), created by this process.
struct Listener {
  int fd = -1;
  int port = 0;
};
Listener Listen(const std::string& address) {
  Listener l;
  l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  socklen_t len = sizeof a;
  if (l.fd < 0 || ::bind(l.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(l.fd, 16) != 0 || ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return {};
  }
  l.port = ntohs(a.sin_port);
  return l;
}

bool BecomeUid(uid_t uid) {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

// A process of `uid` holding a listener on 127.0.0.1 (its socket is the uid's, as a job's is);
// killed by the destructor.
class UidListener {
 public:
  explicit UidListener(uid_t uid) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      int port = 0;
      if (BecomeUid(uid)) port = Listen("127.0.0.1").port;
      (void)!::write(p[1], &port, sizeof port);
      for (;;) ::pause();
    }
    ::close(p[1]);
    if (::read(p[0], &port_, sizeof port_) != sizeof port_) port_ = 0;
    ::close(p[0]);
  }
  ~UidListener() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

enum class Outcome { kConnected, kRefused, kTimedOut, kBroken, kOther };
const char* Name(Outcome o) {
  switch (o) {
    case Outcome::kConnected:
      return "connected";
    case Outcome::kRefused:
      return "refused";
    case Outcome::kTimedOut:
      return "timed out";
    case Outcome::kBroken:
      return "reset after it connected";
    default:
      return "other error";
  }
}

struct Probe {
  Outcome outcome = Outcome::kOther;
  double seconds = 0;
};

// connect() to address:port from a process of `uid` (no uid: this process's), 5 s at most.
Probe ConnectAs(std::optional<uid_t> uid, const std::string& address, int port) {
  const auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (uid && !BecomeUid(*uid)) ::_exit(3);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc != 0 && errno != EINPROGRESS) ::_exit(errno == ECONNREFUSED ? 1 : 3);
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, 5000) == 0) ::_exit(2);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) ::_exit((err == ECONNREFUSED || err == ECONNRESET) ? 1 : 3);
    // A connection is one that carries data: bytes before the listener accept()s (the kernel
    // acknowledges them with no uid on its packets) and after a retransmission timeout.
    for (int i = 0; i < 2; ++i) {
      if (::send(fd, "x", 1, MSG_NOSIGNAL) != 1) ::_exit(4);
      ::usleep(700 * 1000);
    }
    err = 0;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    ::_exit(err == 0 ? 0 : 4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Probe p;
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
  p.outcome = code == 0   ? Outcome::kConnected
              : code == 1 ? Outcome::kRefused
              : code == 2 ? Outcome::kTimedOut
              : code == 4 ? Outcome::kBroken
                          : Outcome::kOther;
  return p;
}

// Enters a namespace of /var/run/netns for this thread and what it forks from now on.
bool EnterNamespace(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

bool NftTableHas(const std::string& table, const std::string& what) {
  std::string out;
  if (FILE* p = ::popen(("nft list table inet " + table + " 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out.find(what) != std::string::npos;
}

bool NftTableExists(const std::string& table) {
  return embody::testing::Sh("nft list table inet " + table) == 0;
}

class JobNetworkNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces and nft)";
    if (embody::testing::Sh("command -v ip") != 0) GTEST_SKIP() << "no `ip` (iproute2)";
    if (auto st = Nft().Usable(); !st.ok()) GTEST_SKIP() << st.ToString();
    net_ = std::make_unique<embody::testing::TwoNamespaces>("ejn", 215);
    std::string failed;
    if (!net_->Up(&failed)) GTEST_SKIP() << "cannot make network namespaces: " << failed;
    home_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(home_, 0);
  }
  void TearDown() override {
    if (home_ >= 0) {
      ::setns(home_, CLONE_NEWNET);
      ::close(home_);
    }
    if (net_) net_->Down();
  }

  std::unique_ptr<embody::testing::TwoNamespaces> net_;
  int home_ = -1;
};

TEST_F(JobNetworkNetnsTest, AJobReachesItsAgentItsPeersAndItselfOnly) {
  const uid_t base = 300000 + static_cast<uid_t>(::getpid() % 1000) * 100;
  const uid_t job = base + 1, other_job = base + 2, other_agents_job = base + 3;

  // A listener on the peer node, and one on the bridge (a machine that is no peer).
  ASSERT_TRUE(EnterNamespace("/var/run/netns/" + net_->ns_b));
  Listener peer = Listen(net_->addr_b);
  ASSERT_GT(peer.port, 0);
  ASSERT_EQ(::setns(home_, CLONE_NEWNET), 0);
  Listener stranger = Listen(net_->server);
  ASSERT_GT(stranger.port, 0);

  // The job's node: its agent's API and a service of the node (root's), the job's own listener,
  // another job's, and one of a job uid no job of this agent holds.
  ASSERT_TRUE(EnterNamespace("/var/run/netns/" + net_->ns_a));
  Listener agent_api = Listen("127.0.0.1");
  Listener service = Listen("127.0.0.1");
  ASSERT_GT(agent_api.port, 0);
  ASSERT_GT(service.port, 0);
  UidListener own(job), others(other_job), other_agents(other_agents_job);
  ASSERT_GT(own.port(), 0);
  ASSERT_GT(others.port(), 0);
  ASSERT_GT(other_agents.port(), 0);

  // Before any rule, everything connects (so each refusal below is the table's doing).
  EXPECT_EQ(ConnectAs(job, net_->server, stranger.port).outcome, Outcome::kConnected);
  EXPECT_EQ(ConnectAs(job, "127.0.0.1", service.port).outcome, Outcome::kConnected);
  EXPECT_EQ(ConnectAs(job, "127.0.0.1", others.port()).outcome, Outcome::kConnected);

  const JobNetworkTable table{"embody_jobs_t" + std::to_string(::getpid()), base, base + 99};
  auto network = JobNetwork::Create(table);
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  EXPECT_FALSE((*network)->Grant({{job}, {}, {}}).ok());  // no agent endpoint yet
  (*network)->SetLocalAgent({"127.0.0.1", agent_api.port});
  ASSERT_TRUE((*network)->Grant({{job}, {}, {net_->addr_a, net_->addr_b}}).ok());
  ASSERT_TRUE((*network)->Grant({{other_job}, {}, {net_->addr_a}}).ok());
  EXPECT_TRUE(NftTableHas(table.name, "chain job_" + std::to_string(job)));

  struct Case {
    const char* what;
    uid_t uid;
    std::string address;
    int port;
    Outcome want;
  };
  const std::vector<Case> cases = {
      {"its agent", job, "127.0.0.1", agent_api.port, Outcome::kConnected},
      {"its own listener", job, "127.0.0.1", own.port(), Outcome::kConnected},
      {"its peer node", job, net_->addr_b, peer.port, Outcome::kConnected},
      {"another agent's job", job, "127.0.0.1", other_agents.port(), Outcome::kConnected},
      {"another job's listener", job, "127.0.0.1", others.port(), Outcome::kRefused},
      {"a service of the node", job, "127.0.0.1", service.port, Outcome::kRefused},
      {"a machine that is no peer", job, net_->server, stranger.port, Outcome::kRefused},
      {"the other job's own listener", other_job, "127.0.0.1", others.port(), Outcome::kConnected},
      {"the job's listener, from the other job", other_job, "127.0.0.1", own.port(),
       Outcome::kRefused},
      {"a node that is not the other job's peer", other_job, net_->addr_b, peer.port,
       Outcome::kRefused},
  };
  for (const Case& c : cases) {
    Probe p = ConnectAs(c.uid, c.address, c.port);
    EXPECT_EQ(p.outcome, c.want) << c.what << ": " << Name(p.outcome) << " after " << p.seconds
                                 << " s";
    // Refused quickly: the client's SYN is reset (at once) or its retransmission is (one RTO).
    if (c.want == Outcome::kRefused) {
      EXPECT_LT(p.seconds, 3.0) << c.what;
    }
  }
  // Root (the agent, the node's services) is not confined.
  EXPECT_EQ(ConnectAs(std::nullopt, net_->server, stranger.port).outcome, Outcome::kConnected);

  // The job ends: its rules go, and going again is no error.
  ASSERT_TRUE((*network)->Revoke({job}).ok());
  EXPECT_TRUE((*network)->Revoke({job}).ok());
  EXPECT_FALSE(NftTableHas(table.name, "job_" + std::to_string(job)));
  EXPECT_TRUE(NftTableHas(table.name, "chain job_" + std::to_string(other_job)));
  EXPECT_EQ(ConnectAs(job, net_->server, stranger.port).outcome, Outcome::kConnected);

  // A restarted agent replaces the table: the other job's uid, still running, is stale and has
  // no network at all until it is stopped, not even its agent.
  auto again = JobNetwork::Create(table);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(NftTableHas(table.name, "chain job_"));
  Probe stale = ConnectAs(other_job, "127.0.0.1", agent_api.port);
  EXPECT_EQ(stale.outcome, Outcome::kRefused) << Name(stale.outcome);
  EXPECT_LT(stale.seconds, 1.0);
  // ... until its uid is given to a job again, which confines it as that job,
  (*again)->SetLocalAgent({"127.0.0.1", agent_api.port});
  ASSERT_TRUE((*again)->Grant({{other_job}, {}, {}}).ok());
  EXPECT_EQ(ConnectAs(other_job, "127.0.0.1", agent_api.port).outcome, Outcome::kConnected);
  EXPECT_EQ(ConnectAs(other_job, net_->server, stranger.port).outcome, Outcome::kRefused);
  ASSERT_TRUE((*again)->Revoke({other_job}).ok());
  // ... or the stale set is emptied once the earlier agent's leftovers are stopped.
  ASSERT_TRUE((*again)->Grant({{other_job}, {}, {}}).ok());
  auto restarted = JobNetwork::Create(table);  // the uid is stale again
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  EXPECT_EQ(ConnectAs(other_job, net_->server, stranger.port).outcome, Outcome::kRefused);
  ASSERT_TRUE((*restarted)->ForgetStale().ok());
  EXPECT_EQ(ConnectAs(other_job, net_->server, stranger.port).outcome, Outcome::kConnected);
  again = std::move(restarted);

  ASSERT_TRUE((*again)->Remove().ok());
  EXPECT_FALSE(NftTableExists(table.name));
  for (int fd : {peer.fd, stranger.fd, agent_api.fd, service.fd}) ::close(fd);
}

// The agent applies its rules through nftables' library; `--nft PATH` spawns that program
// instead. Both write the same table, and both act in the namespace the table was made in.
TEST_F(JobNetworkNetnsTest, TheLibraryAndTheProgramWriteTheSameRules) {
  std::string program;
  if (FILE* p = ::popen("command -v nft", "r")) {
    char buf[512] = {};
    if (std::fgets(buf, sizeof buf, p) != nullptr) program = buf;
    ::pclose(p);
  }
  while (!program.empty() && program.back() == '\n') program.pop_back();
  ASSERT_FALSE(program.empty());
  const uid_t base = 310000 + static_cast<uid_t>(::getpid() % 1000) * 100;
  const JobNetworkTable table{"embody_jobs_l" + std::to_string(::getpid()), base, base + 99};
  ASSERT_TRUE(EnterNamespace("/var/run/netns/" + net_->ns_a));
  auto listing = [&](const std::string& nft) {
    auto network = JobNetwork::Create(table, nft);
    EXPECT_TRUE(network.ok()) << nft << ": " << network.status().ToString();
    if (!network.ok()) return std::string();
    (*network)->SetLocalAgent({"127.0.0.1", 8471});
    EXPECT_TRUE((*network)->Grant({{base + 1, base + 2}, {}, {net_->addr_a, net_->addr_b}}).ok());
    EXPECT_TRUE((*network)->Grant({{base + 3}, {{"fd00::7", 9000}}, {"fd00::7"}}).ok());
    EXPECT_TRUE((*network)->Revoke({base + 3}).ok());
    // Made in the job node's namespace, not in the test's own.
    EXPECT_EQ(::setns(home_, CLONE_NEWNET), 0);
    EXPECT_FALSE(NftTableExists(table.name));
    EXPECT_TRUE(EnterNamespace("/var/run/netns/" + net_->ns_a));
    std::string out;
    if (FILE* p = ::popen(("nft list table inet " + table.name + " 2>&1").c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      ::pclose(p);
    }
    EXPECT_TRUE((*network)->Remove().ok());
    return out;
  };
  const std::string by_library = listing(kDefaultNft);
  EXPECT_NE(by_library.find("chain job_" + std::to_string(base + 1)), std::string::npos)
      << by_library;
  EXPECT_EQ(by_library.find("job_" + std::to_string(base + 3)), std::string::npos) << by_library;
  EXPECT_EQ(listing(program), by_library);
  EXPECT_FALSE(NftTableExists(table.name));
}

}  // namespace
}  // namespace agent
