#include "common/log.h"

#include <cstdio>
#include <mutex>

#include <nlohmann/json.hpp>

#include "common/time_util.h"

namespace common {
namespace {
std::string g_component = "embody";
LogLevel g_min = LogLevel::kInfo;
std::mutex g_mu;

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}
}  // namespace

void InitLog(std::string component, LogLevel min_level) {
  g_component = std::move(component);
  g_min = min_level;
}

namespace {
template <typename Fields>
void Write(LogLevel level, const std::string& msg, const Fields& fields) {
  if (level < g_min) return;
  nlohmann::json j;
  j["ts"] = FormatTimeMillis(NowMillis());
  j["level"] = LevelName(level);
  j["component"] = g_component;
  j["msg"] = msg;
  for (const auto& [k, v] : fields) j[k] = v;
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}
}  // namespace

void Log(LogLevel level, const std::string& msg, std::initializer_list<LogField> fields) {
  Write(level, msg, fields);
}

void LogFields(LogLevel level, const std::string& msg,
               const std::vector<std::pair<std::string, std::string>>& fields) {
  Write(level, msg, fields);
}

}  // namespace common
