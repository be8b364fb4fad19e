#include "agent/rank_exec.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/file_util.h"

namespace agent {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "embody-agent exec-rank: %s\n", message.c_str());
  return 127;
}

}  // namespace

int RankExecMain(const std::vector<std::string>& args) {
  long long address_space = 0;
  std::string file;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--address-space" && i + 1 < args.size()) {
      char* end = nullptr;
      address_space = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end != '\0' || address_space <= 0) return Fail("bad --address-space " + args[i]);
    } else if (file.empty() && args[i].rfind("--", 0) != 0) {
      file = args[i];
    } else {
      return Fail("usage: embody-agent exec-rank [--address-space BYTES] FILE");
    }
  }
  if (file.empty()) return Fail("usage: embody-agent exec-rank [--address-space BYTES] FILE");
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
