#include "controlplane/http/web_files.h"

#include <sys/stat.h>

#include <map>

namespace controlplane::http {

namespace {

constexpr char kAssetPrefix[] = "/assets/";
constexpr size_t kMaxAssetName = 128;

bool IsAllowedAssetName(const std::string& name) {
  if (name.empty() || name.size() > kMaxAssetName || name[0] == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A regular file that is not a symbolic link.
bool IsPlainFile(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

bool IsApiPath(const std::string& p) {
  auto is_or_under = [&p](const std::string& root) {
    return p == root || p.rfind(root + "/", 0) == 0;
  };
  return is_or_under("/v1") || p == "/metrics" || p == "/healthz" || p == "/readyz";
}

common::Result<WebFile> ResolveWebPath(const std::string& web_dir,
                                       const std::string& request_path) {
  if (IsApiPath(request_path)) return common::NotFound("no route for " + request_path);
  const std::string prefix = kAssetPrefix;
  if (request_path.rfind(prefix, 0) == 0) {
    const std::string name = request_path.substr(prefix.size());
    const std::string path = web_dir + "/assets/" + name;
    if (!IsAllowedAssetName(name) || !IsPlainFile(path)) {
      return common::NotFound("no asset " + request_path);
    }
    return WebFile{path, ContentTypeFor(name), kImmutableCache};
  }
  return WebFile{web_dir + "/index.html", "text/html; charset=utf-8", kRevalidateCache};
}

std::string ContentTypeFor(const std::string& file_name) {
  static const std::map<std::string, std::string> kTypes = {
      {"html", "text/html; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"map", "application/json"},
      {"json", "application/json"},
      {"svg", "image/svg+xml"},
      {"png", "image/png"},
      {"ico", "image/x-icon"},
      {"woff2", "font/woff2"},
      {"txt", "text/plain; charset=utf-8"},
  };
  const size_t dot = file_name.rfind('.');
  if (dot != std::string::npos) {
    auto it = kTypes.find(file_name.substr(dot + 1));
    if (it != kTypes.end()) return it->second;
  }
  return "application/octet-stream";
}

}  // namespace controlplane::http
