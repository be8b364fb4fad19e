#include "cli/job_format.h"

#include <cstdio>

#include "cli/format.h"
#include "common/time_util.h"

namespace cli {

namespace {

std::string StepOf(const api::v1::Job& job) {
  if (!job.last_step || !job.last_step->is_object()) return "-";
  const nlohmann::json& step = *job.last_step;
  auto integer = [&step](const char* key) {
    auto it = step.find(key);
    return it != step.end() && it->is_number() ? it->get<int64_t>() : int64_t{0};
  };
  const int64_t total = integer("steps");
  return std::to_string(integer("step")) + (total > 0 ? "/" + std::to_string(total) : "");
}

}  // namespace

std::string JobsTable(const api::v1::JobList& page) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "KIND", "STATE", "STEP", "CREATED", "REASON"}};
  for (const api::v1::Job& j : page.jobs) {
    rows.push_back({std::to_string(j.id), j.name, j.kind, j.state, StepOf(j),
                    common::FormatTimeMillis(j.created_ms), j.reason});
  }
  return FormatTable(rows);
}

std::string JobDetail(const api::v1::Job& job) {
  const nlohmann::json written = api::v1::ToJson(job);
  std::string out = written.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (job.wait_seconds) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "\nwaited %.1f s from submission to start\n",
                  *job.wait_seconds);
    out += buf;
  } else if (!job.finished_ms) {
    out += "\nnot started yet\n";
  }
  if (std::string phases = LaunchPhasesTable(written); !phases.empty()) out += "\n" + phases;
  return out;
}

std::string EventsText(const api::v1::EventList& events) {
  std::string out;
  for (const api::v1::Event& e : events.events) {
    out += common::FormatTimeMillis(e.time_ms) + "  " + e.type + "  " +
           e.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return out;
}

}  // namespace cli
