#include "cli/config.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/file_util.h"

namespace cli {

std::map<std::string, std::string> ParseEnvFile(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b);
    if (line.rfind("export ", 0) == 0) line = line.substr(7);
    size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    out[key] = value;
  }
  return out;
}

namespace {
std::string FindEnvFile() {
  if (const char* home = std::getenv("EMBODY_HOME"); home && *home) {
    return (std::filesystem::path(home) / "env").string();
  }
  std::error_code ec;
  auto dir = std::filesystem::current_path(ec);
  while (!ec && !dir.empty()) {
    auto candidate = dir / ".embody" / "env";
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return "";
}
}  // namespace

common::Result<Config> LoadConfig() {
  Config c;
  const char* url = std::getenv("EMBODY_URL");
  const char* token = std::getenv("EMBODY_TOKEN");
  const char* ca_file = std::getenv("EMBODY_CA_FILE");
  if (url && *url) c.url = url;
  if (token && *token) c.token = token;
  if (ca_file && *ca_file) c.ca_file = ca_file;
  c.source = "environment";
  if (c.url.empty() || c.token.empty()) {
    std::string path = FindEnvFile();
    if (!path.empty()) {
      auto text = common::ReadFile(path);
      if (text.ok()) {
        auto kv = ParseEnvFile(*text);
        if (c.url.empty()) c.url = kv["EMBODY_URL"];
        if (c.token.empty()) c.token = kv["EMBODY_TOKEN"];
        if (c.ca_file.empty()) c.ca_file = kv["EMBODY_CA_FILE"];
        c.source = path;
      }
    }
  }
  if (c.url.empty()) {
    return common::FailedPrecondition(
        "no server configured: set EMBODY_URL and EMBODY_TOKEN, or run ./deploy/quickstart.sh "
        "which writes .embody/env");
  }
  while (!c.url.empty() && c.url.back() == '/') c.url.pop_back();
  return c;
}

}  // namespace cli
