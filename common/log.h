// Structured logging: one JSON object per line on stderr, so operators can ship the lines to any
// log store. Fields are free-form key/value pairs; the level, time and component are always set.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace common {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Sets the component name written in every line ("server", "agent", "engine", "cli") and the
// minimum level. Call once at start; not thread-safe with concurrent Log calls.
void InitLog(std::string component, LogLevel min_level = LogLevel::kInfo);

using LogField = std::pair<const char*, std::string>;
void Log(LogLevel level, const std::string& msg, std::initializer_list<LogField> fields = {});
// The same with fields assembled at run time (the access log adds a handler's fields).
void LogFields(LogLevel level, const std::string& msg,
               const std::vector<std::pair<std::string, std::string>>& fields);

inline void LogInfo(const std::string& m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarn(const std::string& m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, m, f);
}
inline void LogError(const std::string& m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}

}  // namespace common
