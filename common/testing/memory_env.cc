#include "common/testing/memory_env.h"

namespace common::testing {

namespace {
// "/a/b/" -> "/a/b"; a path is compared as written otherwise.
std::string Trim(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}
}  // namespace

// Appends to a buffer; Commit hands it to the Env under the final name.
class MemoryEnv::File : public AtomicWritableFile {
 public:
  File(MemoryEnv* env, std::string path, int mode)
      : env_(env), path_(std::move(path)), mode_(mode) {}
  Status Append(const void* data, size_t n) override {
    if (committed_) return FailedPrecondition(path_ + ": append after commit");
    bytes_.append(static_cast<const char*>(data), n);
    return Status::Ok();
  }
  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return path_; }
  Status Commit() override {
    if (committed_) return FailedPrecondition(path_ + ": committed twice");
    committed_ = true;
    return env_->Publish(path_, std::move(bytes_), mode_);
  }

 private:
  MemoryEnv* env_;
  const std::string path_;
  const int mode_;
  std::string bytes_;
  bool committed_ = false;
};

bool MemoryEnv::DirExists(const std::string& dir) const { return dirs_.count(Trim(dir)) > 0; }

Result<std::unique_ptr<AtomicWritableFile>> MemoryEnv::NewAtomicFile(
    const std::string& path, const AtomicFileOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!DirExists(DirName(path))) return Internal("cannot create a file in " + DirName(path));
  return std::unique_ptr<AtomicWritableFile>(new File(this, path, options.mode));
}

Status MemoryEnv::Publish(const std::string& path, std::string contents, int mode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!DirExists(DirName(path))) return Internal("rename to " + path + ": no directory");
  files_[path] = Entry{std::move(contents), mode};
  return Status::Ok();
}

Result<std::string> MemoryEnv::ReadFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return NotFound("cannot open " + path);
  return it->second.contents;
}

Status MemoryEnv::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(from);
  if (it == files_.end() || !DirExists(DirName(to))) {
    return Internal("rename " + from + " -> " + to + ": no such file or directory");
  }
  Entry e = std::move(it->second);
  files_.erase(it);
  files_[to] = std::move(e);
  return Status::Ok();
}

Status MemoryEnv::Remove(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(path);
  return Status::Ok();
}

Result<std::vector<std::string>> MemoryEnv::List(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string d = Trim(dir);
  if (!DirExists(d)) return NotFound("no directory " + dir);
  std::set<std::string> names;
  auto add_child = [&](const std::string& path) {
    if (DirName(path) == d) names.insert(path.substr(path.rfind('/') + 1));
  };
  for (const auto& [path, e] : files_) add_child(path);
  for (const std::string& sub : dirs_) {
    if (sub != d) add_child(sub);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Status MemoryEnv::MakeDirs(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::string d = Trim(path); !DirExists(d); d = DirName(d)) {
    if (files_.count(d)) return Internal("mkdir " + path + ": " + d + " is a file");
    dirs_.insert(d);
  }
  return Status::Ok();
}

Status MemoryEnv::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  return DirExists(dir) ? Status::Ok() : Internal("cannot open directory " + dir);
}

int MemoryEnv::ModeOf(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  return it == files_.end() ? -1 : it->second.mode;
}

}  // namespace common::testing
