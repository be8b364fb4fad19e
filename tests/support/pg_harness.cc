#include "tests/support/pg_harness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace embody::testing {

namespace {

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int in = open("/dev/null", O_RDONLY);
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0) _exit(127);
  dup2(in, 0);
  dup2(out, 1);
  dup2(out, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string PgBinDir() {
  std::string best;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    std::string bin = e.path().string() + "/bin";
    if (std::filesystem::exists(bin + "/psql") && bin > best) best = bin;
  }
  return best;
}

}  // namespace

std::string SourceDir() { return EMBODY_SOURCE_DIR; }

CommandResult RunCommand(const std::vector<std::string>& argv) {
  char tmpl[] = "/tmp/embody-cmd-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  CommandResult r;
  pid_t pid = Spawn(argv, tmpl);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.output = ReadAll(tmpl);
  unlink(tmpl);
  return r;
}

PgCluster::~PgCluster() {
  if (dir_.empty()) return;
  // Removed next: an immediate stop, with no shutdown checkpoint to write and wait for.
  RunCommand({SourceDir() + "/deploy/pg_cluster.sh", "stop", dir_, "immediate"});
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

common::Status PgCluster::Start() {
  char tmpl[] = "/tmp/embody-pg-XXXXXX";
  if (!mkdtemp(tmpl)) return common::Internal("mkdtemp failed");
  dir_ = tmpl;
  chmod(dir_.c_str(), 0755);
  // A throwaway cluster: initdb need not wait for its files to reach the disk.
  CommandResult r = RunCommand(
      {"env", "PG_CLUSTER_THROWAWAY=1", SourceDir() + "/deploy/pg_cluster.sh", "start", dir_});
  if (r.exit_code != 0) {
    return common::Unavailable("pg_cluster.sh start failed: " + r.output);
  }
  // The conninfo is the last line the script prints.
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  size_t nl = out.rfind('\n');
  conninfo_ = nl == std::string::npos ? out : out.substr(nl + 1);
  if (conninfo_.find("port=") == std::string::npos) {
    return common::Internal("unexpected pg_cluster.sh output: " + r.output);
  }
  return common::Status::Ok();
}

common::Result<std::string> PgCluster::Psql(const std::string& sql) const {
  CommandResult r = RunCommand({PgBinDir() + "/psql", "-X", "-At", "-v", "ON_ERROR_STOP=1",
                                "-d", conninfo_, "-c", sql});
  if (r.exit_code != 0) return common::Internal("psql failed: " + r.output);
  return r.output;
}

common::Result<std::string> PgCluster::CreateDatabase(const std::string& name) const {
  auto r = Psql("CREATE DATABASE " + name);
  if (!r.ok()) return r.status();
  std::string info = conninfo_;
  size_t pos = info.find("dbname=");
  return info.substr(0, pos) + "dbname=" + name;
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) Stop(5);
}

common::Status ChildProcess::Start(const std::vector<std::string>& argv,
                                   const std::string& log_path) {
  pid_ = Spawn(argv, log_path);
  if (pid_ < 0) return common::Internal("fork failed");
  return common::Status::Ok();
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ChildProcess::Stop(double timeout_s) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

}  // namespace embody::testing
