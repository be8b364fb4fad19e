#include "agent/jobs/job_binaries.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/file_util.h"

namespace agent {

namespace {

// Whether others pass every directory above absolute `path` and have `file_bit` on the file.
bool OthersCan(const std::string& path, mode_t file_bit) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & file_bit) == 0) return false;
  for (std::filesystem::path dir = std::filesystem::path(path).parent_path();;
       dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
    if (dir == dir.root_path()) return true;
  }
}

// A copy of `path` in `dir` (made 0755), named as `path` is, with `mode`; written atomically.
common::Result<std::string> CopyForJobs(const std::string& path, const std::string& dir,
                                        std::filesystem::perms mode) {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(dir));
  if (::chmod(dir.c_str(), 0755) != 0) {
    return common::Internal("cannot make " + dir + " reachable by jobs");
  }
  const std::string target = dir + "/" + std::filesystem::path(path).filename().string();
  const std::string temp = target + ".tmp";
  std::error_code ec;
  std::filesystem::copy_file(path, temp, std::filesystem::copy_options::overwrite_existing, ec);
  if (!ec) {
    std::filesystem::permissions(temp, mode, std::filesystem::perm_options::replace, ec);
  }
  if (!ec) std::filesystem::rename(temp, target, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return common::Internal("cannot copy " + path + " to " + target + " for jobs: " + ec.message());
  }
  return target;
}

}  // namespace

bool OthersCanExecute(const std::string& path) {
  return path.empty() || path[0] != '/' || OthersCan(path, S_IXOTH);
}

common::Result<std::string> ExecutableForJobs(const std::string& path, const std::string& dir) {
  if (OthersCanExecute(path) || !std::filesystem::exists(path)) return path;
  return CopyForJobs(path, dir, std::filesystem::perms(0755));
}

common::Result<std::string> ReadableForJobs(const std::string& path, const std::string& dir) {
  if (path.empty() || OthersCan(path, S_IROTH) || !std::filesystem::exists(path)) return path;
  return CopyForJobs(path, dir, std::filesystem::perms(0644));
}

common::Result<std::string> PythonPackageForJobs(const std::string& dir, const std::string& dest) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty() || !fs::is_regular_file(dir + "/embody/__init__.py", ec)) return std::string();
  std::vector<std::string> files;
  bool all_readable = true;
  for (const auto& e : fs::directory_iterator(dir + "/embody", ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".py") continue;
    files.push_back(e.path().string());
    all_readable = all_readable && OthersCan(e.path().string(), S_IROTH);
  }
  if (ec) return common::Internal("cannot list " + dir + "/embody: " + ec.message());
  if (all_readable) return dir;
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(dest));
  if (::chmod(dest.c_str(), 0755) != 0) {
    return common::Internal("cannot make " + dest + " reachable by jobs");
  }
  for (const std::string& f : files) {
    auto copied = CopyForJobs(f, dest + "/embody", fs::perms(0644));
    if (!copied.ok()) return copied.status();
  }
  return dest;
}

}  // namespace agent
