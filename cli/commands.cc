#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "cli/api_client.h"
#include "cli/format.h"
#include "common/file_util.h"

namespace cli {
namespace {

using nlohmann::json;

const char* kUsage = R"(usage: embody <command> [args]

  ls [--state STATE] [--limit N]     list jobs, newest first
  submit FILE|- [--watch]            submit a JobSpec (JSON); prints the job id
  show ID                            the job as JSON
  watch ID                           progress bar until the job ends (exit 0 if it succeeded)
  cancel ID                          cancel a job
  logs ID [-f] [--rank N]            logs of every rank (or one); -f follows until the job ends
  events ID [--type TYPE]            the job's events (state changes, steps, checkpoints)
  metrics ID [--names a,b] [--since STEP] [--max-points N]
                                     the job's step series (default: every field, 500 points)
  nodes                              nodes and their state

The server and token come from EMBODY_URL / EMBODY_TOKEN, or from the .embody/env file that
./deploy/quickstart.sh writes.
)";

int Fail(const common::Status& s) {
  std::string msg = s.message();
  if (!s.field().empty()) msg += " (field " + s.field() + ")";
  std::fprintf(stderr, "embody: %s\n", msg.c_str());
  return 1;
}

int Usage() {
  std::fputs(kUsage, stderr);
  return 2;
}

std::string StepOf(const json& job) {
  if (job.contains("last_step") && job["last_step"].is_object()) {
    return std::to_string(job["last_step"].value("step", 0)) + "/" +
           std::to_string(job["last_step"].value("steps", 0));
  }
  return "-";
}

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// Reads "--flag value" options after the positional arguments.
std::string Option(const std::vector<std::string>& args, const std::string& flag,
                   const std::string& fallback = "") {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return fallback;
}

bool HasFlag(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args) {
    if (a == flag) return true;
  }
  return false;
}

bool IsId(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

int List(ApiClient& api, const std::vector<std::string>& args) {
  std::string path = "/v1/jobs?limit=" + Option(args, "--limit", "50");
  std::string state = Option(args, "--state");
  if (!state.empty()) path += "&state=" + state;
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "KIND", "STATE", "STEP", "CREATED", "REASON"}};
  for (const auto& j : (*r)["jobs"]) {
    rows.push_back({Str(j, "id"), Str(j, "name"), Str(j, "kind"), Str(j, "state"), StepOf(j),
                    Str(j, "created_at"), Str(j, "reason")});
  }
  std::fputs(FormatTable(rows).c_str(), stdout);
  return 0;
}

int Watch(ApiClient& api, const std::string& id) {
  bool tty = ::isatty(STDOUT_FILENO);
  std::string last_line;
  auto last_print = std::chrono::steady_clock::now() - std::chrono::hours(1);
  int failures = 0;
  for (;;) {
    auto r = api.Get("/v1/jobs/" + id);
    if (!r.ok()) {
      if (r.status().code() == common::Code::kUnavailable && ++failures < 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      return Fail(r.status());
    }
    failures = 0;
    const json& job = *r;
    std::string line = ProgressLine(job);
    std::string state = job.value("state", "");
    bool done = state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
    auto now = std::chrono::steady_clock::now();
    if (tty) {
      std::printf("\r\033[K%s", line.c_str());
      std::fflush(stdout);
    } else if (line != last_line && (done || now - last_print > std::chrono::seconds(2))) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      last_print = now;
    }
    last_line = line;
    if (done) {
      if (tty) std::printf("\n");
      if (job.contains("exit_code") && !job["exit_code"].is_null()) {
        std::printf("exit code: %d\n", job["exit_code"].get<int>());
      }
      if (job.contains("latest_checkpoint") && job["latest_checkpoint"].is_object()) {
        std::printf("checkpoint: %s\n", Str(job["latest_checkpoint"], "path").c_str());
      }
      // The engine closes a training run by sampling actions on held-out demonstrations.
      auto eval = api.Get("/v1/jobs/" + id + "/events?type=eval&limit=1");
      if (eval.ok() && (*eval)["events"].is_array() && !(*eval)["events"].empty()) {
        const json& d = (*eval)["events"][0]["data"];
        std::printf("evaluation: action MSE %.4f vs %.4f for zero actions (%d held-out samples, "
                    "%d Euler steps)\n",
                    d.value("action_mse", 0.0), d.value("zero_action_mse", 0.0),
                    d.value("samples", 0), d.value("euler_steps", 0));
      }
      if (state != "SUCCEEDED" && job.contains("reason")) {
        std::printf("reason: %s\n", Str(job, "reason").c_str());
      }
      return state == "SUCCEEDED" ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int Submit(ApiClient& api, const std::vector<std::string>& args) {
  if (args.size() < 2) return Usage();
  std::string body;
  if (args[1] == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    auto text = common::ReadFile(args[1]);
    if (!text.ok()) return Fail(text.status());
    body = *text;
  }
  auto r = api.Post("/v1/jobs", body);
  if (!r.ok()) return Fail(r.status());
  std::string id = Str(*r, "id");
  std::printf("%s\n", id.c_str());
  std::fflush(stdout);
  if (HasFlag(args, "--watch")) return Watch(api, id);
  return 0;
}

int Nodes(ApiClient& api) {
  auto r = api.Get("/v1/nodes");
  if (!r.ok()) return Fail(r.status());
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "ADDRESS", "STATE", "CPU", "GPUS", "USED", "LAST HEARTBEAT"}};
  for (const auto& n : (*r)["nodes"]) {
    std::string gpus = n.contains("gpus") && n["gpus"].is_array()
                           ? std::to_string(n["gpus"].size())
                           : Str(n, "gpus");
    rows.push_back({Str(n, "id"), Str(n, "name"), Str(n, "address"), Str(n, "state"),
                    Str(n, "cpu_slots"), gpus, Str(n, "slots_used"), Str(n, "last_heartbeat")});
  }
  std::fputs(FormatTable(rows).c_str(), stdout);
  return 0;
}

int Events(ApiClient& api, const std::vector<std::string>& args) {
  std::string path = "/v1/jobs/" + args[1] + "/events?limit=1000";
  std::string type = Option(args, "--type");
  if (!type.empty()) path += "&type=" + type;
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  for (const auto& e : (*r)["events"]) {
    std::printf("%s  %-10s %s\n", Str(e, "time").c_str(), Str(e, "type").c_str(),
                e.value("data", json::object()).dump().c_str());
  }
  return 0;
}

int Metrics(ApiClient& api, const std::vector<std::string>& args) {
  std::string path = "/v1/jobs/" + args[1] + "/metrics?";
  for (const auto& [flag, param] : {std::pair<const char*, const char*>{"--names", "names"},
                                    {"--since", "since"},
                                    {"--max-points", "max_points"}}) {
    std::string v = Option(args, flag);
    if (!v.empty()) path += std::string(param) + "=" + v + "&";
  }
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  std::fputs(MetricsTable(*r).c_str(), stdout);
  return 0;
}

int Logs(ApiClient& api, const std::vector<std::string>& args) {
  std::string path = "/v1/jobs/" + args[1] + "/logs?";
  std::string rank = Option(args, "--rank");
  if (!rank.empty()) path += "rank=" + rank + "&";
  if (HasFlag(args, "-f") || HasFlag(args, "--follow")) path += "follow=1";
  common::Status s = api.Stream(path, [](const char* d, size_t n) {
    std::fwrite(d, 1, n, stdout);
    std::fflush(stdout);
  });
  return s.ok() ? 0 : Fail(s);
}

}  // namespace

int RunCli(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string& cmd = args[0];
  bool needs_id = cmd == "show" || cmd == "watch" || cmd == "cancel" || cmd == "logs" ||
                  cmd == "events" || cmd == "metrics";
  if (needs_id && (args.size() < 2 || !IsId(args[1]))) {
    std::fprintf(stderr, "embody: %s needs a job id (a number)\n", cmd.c_str());
    return 2;
  }
  bool known = needs_id || cmd == "ls" || cmd == "submit" || cmd == "nodes";
  if (!known) {
    std::fprintf(stderr, "embody: unknown command \"%s\"\n", cmd.c_str());
    return Usage();
  }
  auto config = LoadConfig();
  if (!config.ok()) return Fail(config.status());
  ApiClient api(*config);

  if (cmd == "ls") return List(api, args);
  if (cmd == "submit") return Submit(api, args);
  if (cmd == "nodes") return Nodes(api);
  if (cmd == "watch") return Watch(api, args[1]);
  if (cmd == "events") return Events(api, args);
  if (cmd == "metrics") return Metrics(api, args);
  if (cmd == "logs") return Logs(api, args);
  if (cmd == "show") {
    auto r = api.Get("/v1/jobs/" + args[1]);
    if (!r.ok()) return Fail(r.status());
    std::printf("%s\n", r->dump(2).c_str());
    return 0;
  }
  // cancel
  auto r = api.Post("/v1/jobs/" + args[1] + "/cancel", "{}");
  if (!r.ok()) return Fail(r.status());
  std::printf("%s %s\n", Str(*r, "id").c_str(), Str(*r, "state").c_str());
  return 0;
}

}  // namespace cli
