#include "agent/data/dataset_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/file_util.h"
#include "common/log.h"
#include "common/parse_int.h"

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

common::Status PrepareTenantDir(const std::string& tenant_dir, std::optional<gid_t> group) {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(fs::path(tenant_dir).parent_path().string()));
  // Made closed (0700) and opened without following links, so the modes below land on this
  // directory and nobody looks in before they do.
  const bool made = ::mkdir(tenant_dir.c_str(), 0700) == 0;
  if (!made && errno != EEXIST) return Errno("mkdir", tenant_dir);
  const int fd = ::open(tenant_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("open (a directory, not a link)", tenant_dir);
  common::Status st;
  if (group) {
    if (::fchown(fd, ::geteuid(), *group) != 0) {
      st = Errno("chown", tenant_dir);
    } else if (::fchmod(fd, 0750) != 0) {
      st = Errno("chmod", tenant_dir);
    }
  } else if (made && ::fchmod(fd, 0750) != 0) {
    st = Errno("chmod", tenant_dir);
  }
  ::close(fd);
  return st;
}

common::Status PrepareDatasetRoot(const std::string& root, const SandboxOptions& sandbox) {
  if (root.empty()) return common::Status::Ok();
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(root));
  if (!sandbox.switch_uid) return common::Status::Ok();
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return Errno("stat", root);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && ::chmod(root.c_str(), st.st_mode & 07755) != 0) {
    return Errno("the dataset root is writable by group or others, and chmod", root);
  }
  common::Status first;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tenant-", 0) != 0) continue;
    // Only names agents write (tenant-7, not tenant-007), and directories, never links.
    auto tenant = common::ParseInt64(std::string_view(name).substr(7), 1);
    if (!tenant.ok() || name != "tenant-" + std::to_string(*tenant)) continue;
    const std::string path = entry.path().string();
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    common::Status fixed;
    if (auto gid = TenantGid(sandbox, *tenant); gid.ok()) {
      fixed = PrepareTenantDir(path, *gid);
    } else {
      // No group to give: nobody's but the agent's until the range covers the tenant.
      common::LogWarn("locking a dataset directory of a tenant without a group",
                      {{"dir", path}, {"reason", gid.status().message()}});
      if (::lchown(path.c_str(), ::geteuid(), ::getegid()) != 0 ||
          ::chmod(path.c_str(), 0700) != 0) {
        fixed = Errno("lock", path);
      }
    }
    if (!fixed.ok() && first.ok()) first = fixed;
  }
  if (ec) return common::Internal("cannot list the dataset root " + root + ": " + ec.message());
  return first;
}

common::Status PrepareImport(const ImportPaths& p, const std::optional<JobCredentials>& owner) {
  EMBODY_RETURN_IF_ERROR(
      PrepareTenantDir(p.tenant_dir, owner ? owner->group : std::optional<gid_t>()));
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
