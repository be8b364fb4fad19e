#include "agent/agent_flags.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/file_util.h"

namespace agent {
namespace {

using common::InvalidArgument;

common::Status ParseInt(const std::string& flag, const std::string& v, int lo, int hi, int* out) {
  try {
    size_t used = 0;
    long n = std::stol(v, &used);
    if (used != v.size() || n < lo || n > hi) throw std::out_of_range(v);
    *out = static_cast<int>(n);
    return common::Status::Ok();
  } catch (const std::exception&) {
    return InvalidArgument("--" + flag + " wants an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], got \"" + v + "\"",
                           flag);
  }
}

common::Status ParseListen(const std::string& v, AgentConfig* c) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("--listen wants HOST:PORT, got \"" + v + "\"", "listen");
  }
  c->listen_host = v.substr(0, colon);
  return ParseInt("listen", v.substr(colon + 1), 0, 65535, &c->listen_port);
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::string AgentUsage() {
  return "usage: embody-agent --server URL (--token TOKEN | --token-file FILE) --data-dir DIR\n"
         "                    [--name NODE] [--listen 127.0.0.1:0] [--address 127.0.0.1]\n"
         "                    [--slots N] [--engine PATH] [--mpirun PATH] [--port-file FILE]\n"
         "                    [--kill-grace-ms 5000] [--nvml-library PATH] [--verbose]\n"
         "                    [--job-uid-base 200000] [--job-uid-count 65536]\n"
         "                    [--run-jobs-as-agent] [--job-max-processes 4096]\n"
         "                    [--job-max-open-files 65536] [--no-cgroups] [--job-path PATH]\n"
         "                    [--metrics-token-file FILE]\n";
}

common::Result<std::string> ParseTokenFile(const std::string& contents) {
  std::string text = Trim(contents);
  if (!text.empty() && text.front() == '{') {
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("agent_token") ||
        !j["agent_token"].is_string()) {
      return InvalidArgument("token file holds JSON without a string \"agent_token\"",
                             "token-file");
    }
    text = Trim(j["agent_token"].get<std::string>());
  }
  if (text.empty()) return InvalidArgument("token file is empty", "token-file");
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument("token file holds more than one word", "token-file");
  }
  return text;
}

common::Result<std::string> ParseMetricsTokenFile(const std::string& contents) {
  std::string text = Trim(contents);
  if (text.empty()) return InvalidArgument("metrics token file is empty", "metrics-token-file");
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgument("metrics token file holds more than one word", "metrics-token-file");
  }
  if (text.size() < kMinMetricsTokenLength) {
    return InvalidArgument(
        "metrics token is shorter than " + std::to_string(kMinMetricsTokenLength) + " characters",
        "metrics-token-file");
  }
  return text;
}

std::string DefaultEnginePath() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "embody-engine";
  return (exe.parent_path() / "embody-engine").string();
}

std::string SelfExecutable() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("embody-agent") : exe.string();
}

common::Result<AgentConfig> ParseAgentFlags(const std::vector<std::string>& args) {
  AgentConfig c;
  std::string token_file;
  using Setter = std::function<common::Status(const std::string&)>;
  auto str = [](std::string* dst) -> Setter {
    return [dst](const std::string& v) {
      *dst = v;
      return common::Status::Ok();
    };
  };
  std::map<std::string, Setter> flags = {
      {"server", str(&c.server)},
      {"token", str(&c.token)},
      {"token-file", str(&token_file)},
      {"name", str(&c.name)},
      {"data-dir", str(&c.data_dir)},
      {"listen", [&c](const std::string& v) { return ParseListen(v, &c); }},
      {"address", str(&c.address)},
      {"slots", [&c](const std::string& v) { return ParseInt("slots", v, 1, 1 << 20, &c.slots); }},
      {"engine", str(&c.engine)},
      {"mpirun", str(&c.mpirun)},
      {"port-file", str(&c.port_file)},
      {"nvml-library", str(&c.nvml_library)},
      {"job-uid-base",
       [&c](const std::string& v) {
         int base = 0;
         EMBODY_RETURN_IF_ERROR(ParseInt("job-uid-base", v, 1000, 2000000000, &base));
         c.job_uid_base = base;
         return common::Status::Ok();
       }},
      {"job-uid-count",
       [&c](const std::string& v) {
         return ParseInt("job-uid-count", v, 1, 1 << 24, &c.job_uid_count);
       }},
      {"job-max-processes",
       [&c](const std::string& v) {
         return ParseInt("job-max-processes", v, 16, 1 << 22, &c.job_max_processes);
       }},
      {"job-max-open-files",
       [&c](const std::string& v) {
         return ParseInt("job-max-open-files", v, 64, 1 << 24, &c.job_max_open_files);
       }},
      {"job-path", str(&c.job_path)},
      {"metrics-token-file", str(&c.metrics_token_file)},
      {"kill-grace-ms",
       [&c](const std::string& v) {
         int ms = 0;
         EMBODY_RETURN_IF_ERROR(ParseInt("kill-grace-ms", v, 0, 3600 * 1000, &ms));
         c.kill_grace = std::chrono::milliseconds(ms);
         return common::Status::Ok();
       }},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) return InvalidArgument("unexpected argument \"" + a + "\"");
    std::string name = a.substr(2);
    if (name == "verbose") {
      c.verbose = true;
      continue;
    }
    if (name == "run-jobs-as-agent") {
      c.run_jobs_as_agent = true;
      continue;
    }
    if (name == "no-cgroups") {
      c.no_cgroups = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) return InvalidArgument("unknown flag --" + name, name);
    if (!has_value) {
      if (i + 1 >= args.size()) return InvalidArgument("--" + name + " needs a value", name);
      value = args[++i];
    }
    EMBODY_RETURN_IF_ERROR(it->second(value));
  }
  if (c.server.empty()) return InvalidArgument("--server is required", "server");
  if (c.data_dir.empty()) return InvalidArgument("--data-dir is required", "data-dir");
  if (!token_file.empty()) {
    if (!c.token.empty()) {
      return InvalidArgument("give --token or --token-file, not both", "token-file");
    }
    auto contents = common::ReadFile(token_file);
    if (!contents.ok()) return InvalidArgument("cannot read " + token_file, "token-file");
    auto token = ParseTokenFile(*contents);
    if (!token.ok()) return token.status();
    c.token = *token;
  }
  if (c.token.empty()) return InvalidArgument("--token or --token-file is required", "token");
  if (!c.metrics_token_file.empty()) {
    auto contents = common::ReadFile(c.metrics_token_file);
    if (!contents.ok()) {
      return InvalidArgument("cannot read " + c.metrics_token_file, "metrics-token-file");
    }
    auto secret = ParseMetricsTokenFile(*contents);
    if (!secret.ok()) return secret.status();
    // Prometheus sends the scrape secret to every agent: it must never be the join token.
    if (*secret == c.token) {
      return InvalidArgument("the metrics token must differ from the agent's token",
                             "metrics-token-file");
    }
    c.metrics_token_sha256 = common::Sha256Hex(*secret);
  }
  if (c.job_uid_base + c.job_uid_count > 2000000000LL) {
    return InvalidArgument("--job-uid-base + --job-uid-count must stay below 2000000000",
                           "job-uid-count");
  }
  if (c.name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) c.name = host;
  }
  if (c.engine.empty()) c.engine = DefaultEnginePath();
  return c;
}

}  // namespace agent
