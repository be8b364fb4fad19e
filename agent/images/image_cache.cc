#include "agent/images/image_cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "agent/launch/container_config.h"
#include "agent/sandbox/spawn.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

namespace fs = std::filesystem;
using common::Result;
using common::Status;
using nlohmann::json;

constexpr int64_t kMaxDocumentBytes = int64_t{4} << 20;  // a manifest (storage/oci_layout.h)
constexpr size_t kMaxLayers = 256;

bool IsDigest(const std::string& d) {
  if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
  return std::all_of(d.begin() + 7, d.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Copies blob `digest` of `size` bytes from layout `from` to layout `to`, checking both.
Status CopyBlob(const std::string& from, const std::string& to, const std::string& digest,
                int64_t size) {
  if (!IsDigest(digest)) return common::InvalidArgument("bad digest " + digest);
  const std::string src = from + "/blobs/sha256/" + digest.substr(7);
  const std::string dst = to + "/blobs/sha256/" + digest.substr(7);
  int in = ::open(src.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return common::ErrnoInternal("cannot open the image's blob " + src);
  struct stat st {};
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != size) {
    ::close(in);
    return common::InvalidArgument("the image's blob " + digest + " is not a file of " +
                                   std::to_string(size) + " bytes");
  }
  int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    ::close(in);
    return errno == EEXIST ? Status::Ok()
                           : common::ErrnoInternal("cannot create " + dst);  // named twice
  }
  common::Sha256 sha;
  std::vector<char> buf(1 << 20);
  Status result = Status::Ok();
  while (result.ok()) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) result = common::ErrnoInternal("cannot read " + src);
    if (n <= 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
    for (ssize_t off = 0; off < n && result.ok();) {
      ssize_t w = ::write(out, buf.data() + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) result = common::ErrnoInternal("cannot write " + dst);
      off += std::max<ssize_t>(w, 0);
    }
  }
  ::close(in);
  if (::close(out) != 0 && result.ok()) result = common::ErrnoInternal("cannot write " + dst);
  if (result.ok() && "sha256:" + sha.FinalHex() != digest) {
    result = common::InvalidArgument("the image's blob " + digest +
                                     " does not hash to its digest (damaged)");
  }
  return result;
}

Result<json> ReadManifest(const std::string& layout, const std::string& digest, int64_t size) {
  EMBODY_ASSIGN_OR_RETURN(text, common::ReadFile(layout + "/blobs/sha256/" + digest.substr(7)));
  (void)size;
  json m = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object()) return common::InvalidArgument("the image manifest is not JSON");
  return m;
}

int64_t DirBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

Result<ImageRunConfig> ReadRunConfig(const std::string& entry_dir) {
  EMBODY_ASSIGN_OR_RETURN(text, common::ReadFile(entry_dir + "/image.json"));
  return ParseImageRunConfigJson(json::parse(text, nullptr, /*allow_exceptions=*/false));
}

}  // namespace

ImageUse::~ImageUse() { cache_->Release(digest_); }

Result<std::unique_ptr<ImageCache>> ImageCache::Open(const ImageCacheOptions& options) {
  if (options.dir.empty() || options.dir[0] != '/') {
    return common::InvalidArgument("the image cache needs an absolute directory");
  }
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(options.dir));
  if (::chmod(options.dir.c_str(), 0711) != 0)
    return common::ErrnoInternal("cannot chmod " + options.dir);
  std::unique_ptr<ImageCache> cache(new ImageCache(options));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0) {
      fs::remove_all(e.path(), ec);  // an unpack a stopped agent left half done
    } else if (IsDigest("sha256:" + name) && fs::is_directory(e.path() / "rootfs", ec)) {
      auto config = ReadRunConfig(e.path().string());
      if (!config.ok()) {
        common::LogWarn("image cache entry without a usable image.json; removed",
                        {{"digest", "sha256:" + name}, {"why", config.status().message()}});
        fs::remove_all(e.path(), ec);
        continue;
      }
      cache->entries_["sha256:" + name] = Entry{DirBytes(e.path().string()), 0, 0, *config};
    }
  }
  return cache;
}

Result<std::unique_ptr<ImageUse>> ImageCache::Acquire(const std::string& digest,
                                                      const std::string& layout_dir) {
  if (!IsDigest(digest)) return common::InvalidArgument("bad image digest \"" + digest + "\"");
  const std::string rootfs = options_.dir + "/" + digest.substr(7) + "/rootfs";
  std::unique_lock<std::mutex> lock(mu_);
  made_.wait(lock, [&] { return making_.count(digest) == 0; });
  if (auto it = entries_.find(digest); it != entries_.end()) {
    ++it->second.users;
    it->second.last_used = ++clock_;
    return std::unique_ptr<ImageUse>(new ImageUse(this, digest, rootfs, it->second.config));
  }
  making_.insert(digest);
  lock.unlock();
  auto made = Make(digest, layout_dir);
  lock.lock();
  making_.erase(digest);
  made_.notify_all();
  if (!made.ok()) return made.status();
  entries_[digest] = Entry{made->first, 1, ++clock_, made->second};
  EvictLocked();
  return std::unique_ptr<ImageUse>(new ImageUse(this, digest, rootfs, made->second));
}

Result<std::pair<int64_t, ImageRunConfig>> ImageCache::Make(const std::string& digest,
                                                            const std::string& layout_dir) {
  const std::string hex = digest.substr(7);
  std::string tmp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tmp = options_.dir + "/.tmp-" + hex + "-" + std::to_string(++tmp_counter_);
  }
  const std::string layout = tmp + "/layout";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  auto fail = [&](const Status& st) -> Result<std::pair<int64_t, ImageRunConfig>> {
    fs::remove_all(tmp, ec);
    return st;
  };
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(layout + "/blobs/sha256"));
  ::chmod(tmp.c_str(), 0700);
  // The manifest first, against the digest the server gave; then what it names.
  struct stat st {};
  const std::string manifest_path = layout_dir + "/blobs/sha256/" + hex;
  if (::lstat(manifest_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > kMaxDocumentBytes) {
    return fail(common::FailedPrecondition("the image's manifest " + digest + " is not in " +
                                           layout_dir + " on this node"));
  }
  const int64_t manifest_size = st.st_size;
  if (auto s = CopyBlob(layout_dir, layout, digest, manifest_size); !s.ok()) return fail(s);
  auto manifest = ReadManifest(layout, digest, manifest_size);
  if (!manifest.ok()) return fail(manifest.status());
  std::vector<json> blobs;
  if (manifest->contains("config")) blobs.push_back((*manifest)["config"]);
  if (!manifest->contains("layers") || !(*manifest)["layers"].is_array() ||
      (*manifest)["layers"].size() > kMaxLayers) {
    return fail(common::InvalidArgument("the image manifest has no usable layers list"));
  }
  for (const auto& l : (*manifest)["layers"]) blobs.push_back(l);
  std::string config_digest;
  if (manifest->contains("config") && (*manifest)["config"].is_object() &&
      (*manifest)["config"].contains("digest") && (*manifest)["config"]["digest"].is_string()) {
    config_digest = (*manifest)["config"]["digest"].get<std::string>();
  }
  int64_t declared = manifest_size;
  for (const json& d : blobs) {
    if (!d.is_object() || !d.contains("digest") || !d["digest"].is_string() ||
        !d.contains("size") || !d["size"].is_number_integer() || d["size"].get<int64_t>() < 0) {
      return fail(common::InvalidArgument("the image manifest has a malformed descriptor"));
    }
    declared += d["size"].get<int64_t>();
    if (declared > options_.max_bytes) {
      return fail(common::FailedPrecondition(
          "the image is larger than this node's image cache (" +
          std::to_string(options_.max_bytes >> 20) + " MiB, --image-cache-gib)"));
    }
    if (auto s = CopyBlob(layout_dir, layout, d["digest"].get<std::string>(),
                          d["size"].get<int64_t>());
        !s.ok()) {
      return fail(s);
    }
  }
  json index{{"schemaVersion", 2},
             {"manifests",
              {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                {"digest", digest},
                {"size", manifest_size},
                {"annotations", {{"org.opencontainers.image.ref.name", "embody"}}}}}}};
  Status s = common::WriteFileAtomic(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})",
                                     0600);
  if (s.ok()) s = common::WriteFileAtomic(layout + "/index.json", index.dump(), 0600);
  if (!s.ok()) return fail(s);

  // umoci, bounded: no file it writes may be larger than the whole cache.
  const std::string log = tmp + "/umoci.log";
  const pid_t pid = ::fork();
  if (pid < 0) return fail(common::ErrnoInternal("cannot fork umoci"));
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(options_.max_bytes);
    ::setrlimit(RLIMIT_FSIZE, &rl);
    const std::string image = layout + ":embody";
    const std::string rootfs = tmp + "/rootfs";
    ::execlp(options_.umoci.c_str(), options_.umoci.c_str(), "raw", "unpack", "--rootless",
             "--image", image.c_str(), rootfs.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string why = WIFEXITED(status) && WEXITSTATUS(status) == 127
                                ? "cannot run " + options_.umoci + " (install umoci)"
                                : "umoci cannot unpack the image: " + OutputTail(log);
    return fail(common::FailedPrecondition(why));
  }
  // The image's Env and WorkingDir, from its config blob (verified against its digest above).
  ImageRunConfig run_config;
  if (!config_digest.empty()) {
    const std::string config_path = layout + "/blobs/sha256/" + config_digest.substr(7);
    if (::lstat(config_path.c_str(), &st) != 0 || st.st_size > kMaxDocumentBytes) {
      return fail(common::InvalidArgument("the image's config blob is missing or larger than "
                                          "4 MiB"));
    }
    auto blob = common::ReadFile(config_path);
    if (!blob.ok()) return fail(blob.status());
    auto parsed = ParseImageRunConfig(json::parse(*blob, nullptr, /*allow_exceptions=*/false));
    if (!parsed.ok()) return fail(parsed.status());
    run_config = *parsed;
  }
  if (Status w = common::WriteFileAtomic(tmp + "/image.json", ToJson(run_config).dump(), 0644);
      !w.ok()) {
    return fail(w);
  }
  fs::remove_all(layout, ec);
  fs::remove(log, ec);
  // Jobs' uids pass through to the root file system, and read what the image lets others read.
  ::chmod(tmp.c_str(), 0711);
  ::chmod((tmp + "/rootfs").c_str(), 0755);
  const int64_t bytes = DirBytes(tmp);
  if (bytes > options_.max_bytes) {
    return fail(common::FailedPrecondition("the image unpacks to " + std::to_string(bytes >> 20) +
                                           " MiB, more than this node's image cache holds"));
  }
  const std::string final_dir = options_.dir + "/" + hex;
  fs::remove_all(final_dir, ec);  // a leftover the cache did not know (no job holds it)
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
    return fail(common::ErrnoInternal("cannot rename " + tmp));
  common::LogInfo("image unpacked", {{"digest", digest}, {"bytes", std::to_string(bytes)}});
  return std::make_pair(bytes, run_config);
}

void ImageCache::Release(const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(digest); it != entries_.end() && it->second.users > 0) {
    --it->second.users;
  }
  EvictLocked();
}

void ImageCache::EvictLocked() {
  int64_t total = 0;
  for (const auto& [d, e] : entries_) total += e.bytes;
  while (total > options_.max_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.users == 0 &&
          (victim == entries_.end() || it->second.last_used < victim->second.last_used)) {
        victim = it;
      }
    }
    if (victim == entries_.end()) return;  // all held: over the size until one is released
    std::error_code ec;
    fs::remove_all(options_.dir + "/" + victim->first.substr(7), ec);
    common::LogInfo("image evicted", {{"digest", victim->first}});
    total -= victim->second.bytes;
    entries_.erase(victim);
  }
}

int64_t ImageCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t total = 0;
  for (const auto& [d, e] : entries_) total += e.bytes;
  return total;
}

std::vector<std::string> ImageCache::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [d, e] : entries_) out.push_back(d);
  return out;
}

Status ImageCache::EnsureMountpoints(const std::string& rootfs,
                                     const std::vector<std::string>& paths,
                                     const std::vector<std::string>& files) {
  std::lock_guard<std::mutex> lock(mu_);
  auto make = [&](const std::string& path, bool is_file) -> Status {
    if (path.empty() || path[0] != '/') return common::InvalidArgument("relative mount " + path);
    int fd = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return common::ErrnoInternal("cannot open " + rootfs);
    std::vector<std::string> parts;
    for (size_t start = 1; start <= path.size();) {
      size_t end = path.find('/', start);
      if (end == std::string::npos) end = path.size();
      if (end > start) parts.push_back(path.substr(start, end - start));
      start = end + 1;
    }
    std::string walked;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string& part = parts[i];
      walked += "/" + part;
      if (part == "." || part == "..") {
        ::close(fd);
        return common::InvalidArgument("mount path with \"..\": " + path);
      }
      const bool last = i + 1 == parts.size();
      struct stat st {};
      if (::fstatat(fd, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) {
          ::close(fd);
          return common::ErrnoInternal("cannot look at " + walked + " in the image");
        }
        if (last && is_file) {
          int f = ::openat(fd, part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0644);
          ::close(fd);
          if (f < 0) return common::ErrnoInternal("cannot make " + walked + " in the image");
          ::close(f);
          return Status::Ok();
        }
        if (::mkdirat(fd, part.c_str(), 0755) != 0 && errno != EEXIST) {
          ::close(fd);
          return common::ErrnoInternal("cannot make " + walked + " in the image");
        }
        if (::fstatat(fd, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          ::close(fd);
          return common::ErrnoInternal("cannot look at " + walked + " in the image");
        }
      }
      const bool want_dir = !(last && is_file);
      if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        ::close(fd);
        return common::FailedPrecondition(
            "the image has " + std::string(S_ISLNK(st.st_mode) ? "a symbolic link" : "a file") +
            " at " + walked + ", where the job's " + path + " is mounted");
      }
      if (last) break;
      int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ::close(fd);
      if (next < 0) return common::ErrnoInternal("cannot enter " + walked + " in the image");
      fd = next;
    }
    ::close(fd);
    return Status::Ok();
  };
  for (const char* dir : {"/proc", "/dev", "/sys", "/tmp"}) {
    EMBODY_RETURN_IF_ERROR(make(dir, false));
  }
  for (const auto& p : paths) EMBODY_RETURN_IF_ERROR(make(p, false));
  for (const auto& f : files) EMBODY_RETURN_IF_ERROR(make(f, true));
  // /etc/hosts and /etc/resolv.conf: the host's are mounted over what the image has (crun
  // resolves a link there inside the root); only a missing one needs a mount point.
  for (const char* etc : {"/etc/hosts", "/etc/resolv.conf"}) {
    struct stat st {};
    if (::stat(etc, &st) != 0) continue;
    if (::lstat((rootfs + etc).c_str(), &st) == 0) continue;
    EMBODY_RETURN_IF_ERROR(make(etc, true));
  }
  return Status::Ok();
}

Status ImageCache::EnsureContainerMountpoints(const std::string& command_file,
                                              const std::vector<std::string>& extra_dirs) {
  auto command = nlohmann::json::parse(command_file, nullptr, /*allow_exceptions=*/false);
  auto container = ParseContainerPlan(
      command.is_object() ? command.value("container", nlohmann::json()) : nlohmann::json());
  if (!container.ok()) return container.status();
  std::vector<std::string> dirs = extra_dirs, files{container->init};
  for (const ContainerBind& b : container->binds) (b.is_file ? files : dirs).push_back(b.path);
  // The image's WorkingDir, made (as Docker does) where the image does not have it; one it has,
  // through a link or not, is crun's to enter.
  const std::string& wd = container->image.working_dir;
  if (!wd.empty() && wd != "/") {
    struct stat st {};
    if (::lstat((container->rootfs + wd).c_str(), &st) != 0 && errno == ENOENT) dirs.push_back(wd);
  }
  return EnsureMountpoints(container->rootfs, dirs, files);
}

}  // namespace agent
