#include "agent/dataset_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/file_util.h"

namespace agent {

namespace fs = std::filesystem;

namespace {

common::Status Errno(const std::string& what, const std::string& path) {
  return common::Internal(what + " " + path + ": " + std::strerror(errno));
}

// Gives one entry to the agent's uid with a read-only mode for others. lchown/fchmodat on the
// name: a symbolic link is refused before it could be followed.
common::Status SealEntry(const std::string& path, bool dir) {
  if (::lchown(path.c_str(), ::geteuid(), ::getegid()) != 0 && errno != EPERM) {
    return Errno("chown", path);
  }
  if (::chmod(path.c_str(), dir ? 0755 : 0444) != 0) return Errno("chmod", path);
  return common::Status::Ok();
}

}  // namespace

common::Result<ImportPaths> ImportPathsFor(const std::string& root, int64_t tenant_id,
                                           const nlohmann::json& spec) {
  if (root.empty()) {
    return common::FailedPrecondition(
        "this node has no dataset root: start embody-agent with --dataset-root DIR (the same "
        "directory as the server's)");
  }
  const auto imp = spec.is_object() ? spec.find("import") : spec.end();
  if (imp == spec.end() || !imp->is_object() || !imp->contains("dataset_id") ||
      !(*imp)["dataset_id"].is_number_integer() || (*imp)["dataset_id"].get<int64_t>() <= 0 ||
      tenant_id <= 0) {
    return common::InvalidArgument("import job without a dataset id", "import.dataset_id");
  }
  const std::string id = std::to_string((*imp)["dataset_id"].get<int64_t>());
  ImportPaths p;
  p.tenant_dir = root + "/tenant-" + std::to_string(tenant_id);
  p.staging_dir = p.tenant_dir + "/.import-" + id;
  p.output_dir = p.staging_dir + "/dataset";
  p.final_dir = p.tenant_dir + "/dataset-" + id;
  return p;
}

common::Status PrepareImport(const ImportPaths& p, const std::optional<JobCredentials>& owner) {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(p.tenant_dir));
  if (::chmod(p.tenant_dir.c_str(), 0755) != 0) return Errno("chmod", p.tenant_dir);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(p.final_dir, ec))) {
    return common::Status(common::Code::kAlreadyExists, p.final_dir + " exists already");
  }
  return MakePrivateDir(p.staging_dir, owner);
}

common::Status PublishImport(const ImportPaths& p) {
  struct stat st {};
  if (::lstat(p.output_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return common::Internal("the import left no dataset directory at " + p.output_dir);
  }
  std::error_code ec;
  fs::recursive_directory_iterator it(p.output_dir, fs::directory_options::none, ec), end;
  if (ec) return common::Internal("cannot read " + p.output_dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return common::Internal("cannot read " + p.output_dir + ": " + ec.message());
    const std::string path = it->path().string();
    if (::lstat(path.c_str(), &st) != 0) return Errno("lstat", path);
    // Only what embody-data writes: directories and single-link regular files.
    if (S_ISDIR(st.st_mode)) {
      EMBODY_RETURN_IF_ERROR(SealEntry(path, true));
    } else if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
      EMBODY_RETURN_IF_ERROR(SealEntry(path, false));
    } else {
      return common::Internal("the import output holds " + path +
                              ", which is not a plain file or directory");
    }
  }
  EMBODY_RETURN_IF_ERROR(SealEntry(p.output_dir, true));
  if (::rename(p.output_dir.c_str(), p.final_dir.c_str()) != 0) {
    return Errno("rename " + p.output_dir + " ->", p.final_dir);
  }
  DiscardImport(p);
  return common::Status::Ok();
}

void DiscardImport(const ImportPaths& p) {
  std::error_code ec;
  fs::remove_all(p.staging_dir, ec);
}

}  // namespace agent
