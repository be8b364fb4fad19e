#include "agent/rank_exec.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/parse_int.h"

namespace agent {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "embody-agent exec-rank: %s\n", message.c_str());
  return 127;
}

}  // namespace

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
    return Fail(std::string(e.what()) +
                "\nusage: embody-agent exec-rank [--address-space BYTES] FILE");
  }
  if (!address_space_text.empty()) {
    auto n = common::ParseInt64(address_space_text, 1, std::numeric_limits<int64_t>::max(),
                                "--address-space");
    if (!n.ok()) return Fail("bad --address-space: " + n.status().message());
    address_space = *n;
  }
  auto text = common::ReadFile(file);
  if (!text.ok()) return Fail("cannot read " + file);
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("argv") || !j["argv"].is_array() || j["argv"].empty()) {
    return Fail(file + " holds no argv");
  }
  std::vector<std::string> argv;
  for (const auto& a : j["argv"]) {
    if (!a.is_string()) return Fail(file + ": argv must be strings");
    argv.push_back(a.get<std::string>());
  }
  if (address_space > 0) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(address_space);
    if (::setrlimit(RLIMIT_AS, &rl) != 0) {
      return Fail(std::string("cannot set RLIMIT_AS: ") + std::strerror(errno));
    }
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  return Fail("cannot execute " + argv[0] + ": " + std::strerror(errno));
}

}  // namespace agent
