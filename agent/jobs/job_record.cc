#include "agent/jobs/job_record.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <regex>

#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

constexpr size_t kMaxRecordBytes = 64 * 1024;

nlohmann::json ToJson(const JobRecord& r) {
  nlohmann::json j = {{"job_id", r.job_id},
                      {"attempt", r.attempt},
                      {"tenant", r.tenant},
                      {"watcher_pid", r.watcher.pid},
                      {"watcher_start", r.watcher.start_time}};
  if (r.processes) j["processes"] = agent::ToJson(*r.processes);
  if (r.finished) {
    j["finished"] = {{"exit_code", r.finished->exit_code},
                     {"reason", r.finished->reason},
                     {"killed", r.finished->killed},
                     {"lost", r.finished->lost}};
  }
  return j;
}

common::Result<JobRecord> Parse(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return common::InvalidArgument("not a JSON object");
  JobRecord r;
  try {
    r.job_id = j.at("job_id").get<int64_t>();
    r.attempt = j.at("attempt").get<int>();
    r.tenant = j.at("tenant").get<std::string>();
    r.watcher.pid = j.at("watcher_pid").get<pid_t>();
    r.watcher.start_time = j.at("watcher_start").get<uint64_t>();
    if (j.contains("processes")) {
      EMBODY_ASSIGN_OR_RETURN(p, ParseJobProcesses(j["processes"]));
      r.processes = std::move(p);
    }
    if (j.contains("finished")) {
      const auto& f = j["finished"];
      r.finished = api::FinishedJob{r.job_id, f.at("exit_code").get<int>(),
                                    f.at("reason").get<std::string>(), f.at("killed").get<bool>(),
                                    f.at("lost").get<bool>()};
    }
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(e.what());
  }
  if (r.job_id <= 0) return common::InvalidArgument("bad job id");
  if (r.processes && r.processes->job_id != r.job_id) {
    return common::InvalidArgument("processes of another job");
  }
  return r;
}

}  // namespace

std::string JobRecords::PathFor(int64_t job_id) const {
  return dir_ + "/job-" + std::to_string(job_id) + ".json";
}

common::Status JobRecords::Save(const JobRecord& r) const {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return common::Internal("cannot make " + dir_);
  }
  return common::WriteFileAtomic(PathFor(r.job_id), ToJson(r).dump() + "\n", 0600);
}

void JobRecords::Remove(int64_t job_id) const { ::unlink(PathFor(job_id).c_str()); }

std::vector<JobRecord> JobRecords::LoadAll() const {
  static const std::regex kName(R"(job-\d{1,18}\.json)");
  std::vector<JobRecord> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, kName)) continue;  // temp files of an interrupted write, ...
    std::error_code size_ec;
    auto size = std::filesystem::file_size(e.path(), size_ec);
    common::Result<JobRecord> r = common::InvalidArgument("too large or unreadable");
    if (!size_ec && size <= kMaxRecordBytes && e.is_regular_file(size_ec)) {
      auto text = common::ReadFile(e.path().string());
      r = text.ok() ? Parse(*text) : common::Result<JobRecord>(text.status());
    }
    if (!r.ok()) {
      common::LogWarn("dropping an unreadable job record",
                      {{"file", e.path().string()}, {"error", r.status().message()}});
      std::filesystem::remove(e.path(), size_ec);
      continue;
    }
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace agent
