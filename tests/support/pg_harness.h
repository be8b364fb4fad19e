// Test support: a private PostgreSQL cluster per test binary, free loopback ports, and child
// processes with captured output.
//
//   static embody::testing::PgCluster* pg;   // in SetUpTestSuite: pg = new PgCluster; pg->Start()
//   pg->conninfo()                           // "host=127.0.0.1 port=... user=embody dbname=embody"
//
// PgCluster runs deploy/pg_cluster.sh on a fresh directory under /tmp (mode 0755 so that the
// postgres user can reach it when tests run as root) and stops and removes it on destruction.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace embody::testing {

class PgCluster {
 public:
  PgCluster() = default;
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;
  ~PgCluster();

  common::Status Start();
  const std::string& conninfo() const { return conninfo_; }
  const std::string& dir() const { return dir_; }
  // Runs SQL through psql against the cluster's database; returns psql's output (-At).
  common::Result<std::string> Psql(const std::string& sql) const;
  // A new, empty database in the same cluster; returns its conninfo.
  common::Result<std::string> CreateDatabase(const std::string& name) const;

 private:
  std::string dir_;
  std::string conninfo_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeLoopbackPort();

// Runs `argv` with stdin closed and stdout+stderr captured to a file; returns the exit status
// and the output. For commands that finish.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult RunCommand(const std::vector<std::string>& argv);

// A long-running child (e.g. embody-server); output goes to `log_path`. Killed (SIGTERM, then
// SIGKILL) on destruction.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();
  common::Status Start(const std::vector<std::string>& argv, const std::string& log_path);
  // Sends SIGTERM and waits up to `timeout_s`; returns the exit status (-1 on timeout, after
  // which the child is killed).
  int Stop(double timeout_s = 10);
  // SIGKILL and reap, as if the machine it ran on had gone away: no clean-up of its own.
  void Kill();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The repository root (compile-time EMBODY_SOURCE_DIR).
std::string SourceDir();

}  // namespace embody::testing
