#include "agent/launch/rank_exec.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/launch_env.h"
#include "agent/launch/container_exec.h"
#include "common/file_util.h"
#include "common/parse_int.h"

namespace agent {
namespace {

int ExecRankFail(const std::string& message) {
  std::fprintf(stderr, "embody-agent exec-rank: %s\n", message.c_str());
  return 127;
}

// A rank of a multi-node job writes its own output files: <dir>/rank.N/{stdout,stderr}, N its
// world rank, the layout mpirun's --output-filename DIR:nojobid makes (agent/jobs/rank_logs.h reads
// it). The directory is the job directory of the node the rank runs on, made by its agent.
std::string RedirectOutput(const std::string& dir) {
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank_text == nullptr) return "no OMPI_COMM_WORLD_RANK for EMBODY_RANK_LOG_DIR";
  auto rank = common::ParseInt64(rank_text, 0, 1 << 24, "OMPI_COMM_WORLD_RANK");
  if (!rank.ok()) return rank.status().message();
  return RedirectRankOutput(dir, *rank);
}

// torch.distributed's names for what Open MPI tells each rank (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, NODE_RANK), so init_process_group(init_method="env://") finds its peers as
// under torchrun; MASTER_ADDR and MASTER_PORT come from the head's agent. Ranks are placed node
// by node, the same number on each (the job's ranks_per_node), so a rank's node is its rank over
// that number. Nothing is set where Open MPI said nothing (a rank started some other way).
void SetTorchRendezvous() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (rank == nullptr || size == nullptr || local_rank == nullptr || local_size == nullptr) return;
  auto r = common::ParseInt64(rank, 0, 1 << 24, "OMPI_COMM_WORLD_RANK");
  auto n = common::ParseInt64(local_size, 1, 1 << 24, "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!r.ok() || !n.ok()) return;
  ::setenv("RANK", rank, 1);
  ::setenv("WORLD_SIZE", size, 1);
  ::setenv("LOCAL_RANK", local_rank, 1);
  ::setenv("LOCAL_WORLD_SIZE", local_size, 1);
  ::setenv("NODE_RANK", std::to_string(*r / *n).c_str(), 1);
}

// Under "launcher": "torchrun" each process mpirun starts is one node's torchrun: its rank among
// them is the node's, and torchrun reads that and the rendezvous address from its PET_*
// variables (its workers get RANK, WORLD_SIZE, LOCAL_RANK, ... from torchrun; NODE_RANK from
// here).
void SetTorchrunNode() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank == nullptr || !common::ParseInt64(rank, 0, 1 << 24, "OMPI_COMM_WORLD_RANK").ok()) {
    return;
  }
  ::setenv("PET_NODE_RANK", rank, 1);
  ::setenv("NODE_RANK", rank, 1);
  if (const char* addr = std::getenv("MASTER_ADDR")) ::setenv("PET_MASTER_ADDR", addr, 1);
  if (const char* port = std::getenv("MASTER_PORT")) ::setenv("PET_MASTER_PORT", port, 1);
}

// A default-launcher rank other than 0 preloads `library` (agent/launch/rendezvous_wait.h): its
// connect() to MASTER_ADDR:MASTER_PORT waits until rank 0's store accepts. Before any preload the
// job's environment names, which it keeps. Rank 0 starts the store itself; a rank without the
// rendezvous variables has nothing to wait for.
void SetRendezvousWait(const std::string& library) {
  const char* rank = std::getenv("RANK");
  if (library.empty() || library[0] != '/' || library.find_first_of(": ") != std::string::npos ||
      rank == nullptr || std::string(rank) == "0" || std::getenv("MASTER_ADDR") == nullptr ||
      std::getenv("MASTER_PORT") == nullptr || ::access(library.c_str(), R_OK) != 0) {
    return;
  }
  const char* before = std::getenv("LD_PRELOAD");
  std::string preload = library;
  if (before != nullptr && *before != '\0') preload += std::string(" ") + before;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
}

// The interface that holds this node's address (EMBODY_NODE_ADDRESS, the one other nodes reach it
// by), named to gloo and NCCL for their own sockets unless the job names one: left to itself,
// gloo takes the address the host name resolves to, often 127.0.1.1, which no other node reaches.
void SetCollectiveInterface() {
  const char* address = std::getenv(api::kEnvNodeAddress);
  if (address == nullptr || *address == '\0') return;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;
  std::string name;
  for (ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                  sizeof text);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                  sizeof text);
    }
    if (std::string(text) == address) name = a->ifa_name;
  }
  ::freeifaddrs(list);
  if (name.empty()) return;
  ::setenv("GLOO_SOCKET_IFNAME", name.c_str(), 0);
  ::setenv("NCCL_SOCKET_IFNAME", name.c_str(), 0);
}

}  // namespace

std::string RedirectRankOutput(const std::string& dir, int64_t rank) {
  const std::string mine = dir + "/rank." + std::to_string(rank);
  if (::mkdir(mine.c_str(), 0700) != 0 && errno != EEXIST) {
    return "cannot make " + mine + ": " + std::strerror(errno);
  }
  const char* names[] = {"stdout", "stderr"};
  for (int fd = 1; fd <= 2; ++fd) {
    const std::string path = mine + "/" + names[fd - 1];
    int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) return "cannot open " + path + ": " + std::strerror(errno);
    if (::dup2(out, fd) < 0) return "cannot redirect to " + path + ": " + std::strerror(errno);
    ::close(out);
  }
  return "";
}

int RankExecMain(const std::vector<std::string>& args) {
  // mpirun writes this command line (mpi_launch.cc); it is still checked as strictly as any.
  int64_t address_space = 0;
  std::string address_space_text, file;
  CLI::App app("embody-agent exec-rank: run one rank of a job from its command file",
               "embody-agent exec-rank");
  app.add_option("--address-space", address_space_text, "RLIMIT_AS of the rank, in bytes")
      ->type_name("BYTES");
  app.add_option("FILE", file, "the job's command.json")->required();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return ExecRankFail(std::string(e.what()) +
                        "\nusage: embody-agent exec-rank [--address-space BYTES] FILE");
  }
  if (!address_space_text.empty()) {
    auto n = common::ParseInt64(address_space_text, 1, std::numeric_limits<int64_t>::max(),
                                "--address-space");
    if (!n.ok()) return ExecRankFail("bad --address-space: " + n.status().message());
    address_space = *n;
  }
  if (const char* dir = std::getenv(api::kEnvRankLogDir); dir != nullptr && dir[0] == '/') {
    if (std::string err = RedirectOutput(dir); !err.empty()) return ExecRankFail(err);
  }
  // A relative FILE is the node's own command file, in the job directory its agent made.
  if (const char* job_dir = std::getenv(api::kEnvJobDir);
      !file.empty() && file[0] != '/' && job_dir != nullptr && job_dir[0] == '/') {
    file = std::string(job_dir) + "/" + file;
  }
  auto text = common::ReadFile(file);
  if (!text.ok()) return ExecRankFail("cannot read " + file);
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("argv") || !j["argv"].is_array() || j["argv"].empty()) {
    return ExecRankFail(file + " holds no argv");
  }
  std::vector<std::string> argv;
  for (const auto& a : j["argv"]) {
    if (!a.is_string()) return ExecRankFail(file + ": argv must be strings");
    argv.push_back(a.get<std::string>());
  }
  if (address_space > 0) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(address_space);
    if (::setrlimit(RLIMIT_AS, &rl) != 0) {
      return ExecRankFail(std::string("cannot set RLIMIT_AS: ") + std::strerror(errno));
    }
  }
  if (j.contains("launcher") && j["launcher"] == "torchrun") {
    SetTorchrunNode();
  } else {
    SetTorchRendezvous();
    if (!j.contains("container") && j.contains("rendezvous_wait") &&
        j["rendezvous_wait"].is_string()) {
      SetRendezvousWait(j["rendezvous_wait"].get<std::string>());
    }
  }
  SetCollectiveInterface();
  if (j.contains("container")) {
    // An image job: the argv runs inside its image, under crun (agent/launch/container_exec.h).
    auto plan = ParseContainerPlan(j["container"]);
    if (!plan.ok()) return ExecRankFail(file + ": " + plan.status().message());
    return ExecRankFail(ExecInContainer(*plan, argv));
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  return ExecRankFail("cannot execute " + argv[0] + ": " + std::strerror(errno));
}

}  // namespace agent
