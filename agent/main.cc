// embody-agent: one per node. Flags in agent/agent_flags.h; everything else in agent/agent.h.
// SIGTERM/SIGINT: stop heartbeating, kill the running jobs (whole trees), report, exit.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_flags.h"
#include "agent/job_subcommands.h"
#include "agent/rsh/rsh_client.h"
#include "common/log.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  // exec-rank, launch-ranks and watch-job (agent/job_subcommands.h): before anything below,
  // which would hand a rank a blocked signal mask through exec.
  if (auto status = agent::RunJobSubcommand(args)) return *status;
  // `rsh`: Open MPI's remote launcher for multi-node jobs (agent/rsh/rsh_client.h), run by mpirun
  // with the default signal dispositions it needs.
  if (!args.empty() && args[0] == "rsh") {
    return agent::RshMain(std::vector<std::string>(args.begin() + 1, args.end()));
  }

  // Signals are blocked before any thread exists so every thread inherits the mask and only the
  // main thread's sigwait sees them; children get a clean mask back in SpawnInNewSession.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(agent::AgentUsage().c_str(), stdout);
      return 0;
    }
  }
  auto options = agent::ParseAgentFlags(args);
  if (!options.ok()) {
    std::fprintf(stderr, "embody-agent: %s\n%s", options.status().message().c_str(),
                 agent::AgentUsage().c_str());
    return 2;
  }
  common::InitLog("agent", options->verbose ? common::LogLevel::kDebug : common::LogLevel::kInfo);
  auto created = agent::Agent::Create(*options);
  if (!created.ok()) {
    common::LogError(created.status().message());
    return 1;
  }
  std::unique_ptr<agent::Agent> node_agent = std::move(*created);
  if (auto st = node_agent->Start(); !st.ok()) {
    common::LogError(st.message());
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  common::LogInfo("stopping", {{"signal", std::to_string(sig)}});
  node_agent->Stop();
  return 0;
}
