// embody-server: the control plane process. Flags in controlplane/flags.h; everything else in
// controlplane/server.h. SIGTERM and SIGINT stop it cleanly.
#include <csignal>
#include <cstdio>

#include "common/log.h"
#include "controlplane/flags.h"
#include "controlplane/server.h"

int main(int argc, char** argv) {
  common::InitLog("server");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(controlplane::ServerUsage().c_str(), stdout);
    return 0;
  }
  auto opts = controlplane::ParseServerFlags(args);
  if (!opts.ok()) {
    std::fprintf(stderr, "embody-server: %s\n%s", opts.status().ToString().c_str(),
                 controlplane::ServerUsage().c_str());
    return 2;
  }
  // Block the stop signals in every thread (threads inherit the mask), then wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto server = controlplane::Server::Start(*opts);
  if (!server.ok()) {
    common::LogError("cannot start", {{"error", server.status().ToString()}});
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  common::LogInfo("shutting down", {{"signal", std::to_string(sig)}});
  (*server)->Stop();
  return 0;
}
