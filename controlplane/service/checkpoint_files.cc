#include "controlplane/service/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/crypto.h"
#include "common/file_util.h"

namespace controlplane::service {

namespace {
std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }
}  // namespace

BlobReader::~BlobReader() { ::close(fd_); }

Result<std::string> BlobReader::Read(int64_t offset, size_t n) const {
  if (offset < 0 || offset >= size_) return std::string();
  n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), size_ - offset));
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, out.data() + done, n - done, offset + static_cast<int64_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return common::Internal(Errno("read of checkpoint blob"));
    done += static_cast<size_t>(r);
  }
  return out;
}

std::string CheckpointFiles::Dir(const CheckpointBlob& c) const {
  return root_ + "/tenant-" + std::to_string(c.tenant_id) + "/job-" + std::to_string(c.job_id);
}
std::string CheckpointFiles::PartPath(const CheckpointBlob& c) const {
  return Dir(c) + "/" + std::to_string(c.id) + ".part";
}
std::string CheckpointFiles::BlobPath(const CheckpointBlob& c) const {
  return Dir(c) + "/" + std::to_string(c.id) + ".ckpt";
}

Status CheckpointFiles::AppendChunk(const CheckpointBlob& c, int64_t offset,
                                    const std::string& data) const {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(Dir(c)));
  const std::string path = PartPath(c);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return common::Internal(Errno("cannot open " + path));
  Status st;
  if (::ftruncate(fd, offset) != 0) st = common::Internal(Errno("truncate of " + path));
  size_t done = 0;
  while (st.ok() && done < data.size()) {
    ssize_t w =
        ::pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<int64_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      st = common::Internal(Errno("write to " + path));
    else
      done += static_cast<size_t>(w);
  }
  if (st.ok() && ::fdatasync(fd) != 0) st = common::Internal(Errno("fdatasync of " + path));
  ::close(fd);
  return st;
}

Result<CheckpointFiles::Digest> CheckpointFiles::DigestPart(const CheckpointBlob& c) const {
  const std::string path = PartPath(c);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return Digest{0, common::Sha256Hex("")};
    return common::Internal(Errno("cannot open " + path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return common::Internal(Errno("stat of " + path));
  }
  BlobReader sized(fd, st.st_size);
  common::Sha256 h;
  constexpr size_t kBlock = 4 << 20;
  for (int64_t off = 0; off < st.st_size; off += kBlock) {
    EMBODY_ASSIGN_OR_RETURN(block, sized.Read(off, kBlock));
    h.Update(block.data(), block.size());
  }
  return Digest{st.st_size, h.FinalHex()};
}

Status CheckpointFiles::Publish(const CheckpointBlob& c) const {
  const std::string from = PartPath(c), to = BlobPath(c);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    // An empty checkpoint never had a chunk, so it has no part file.
    if (errno != ENOENT || c.bytes != 0) return common::Internal(Errno("rename to " + to));
    EMBODY_RETURN_IF_ERROR(common::MakeDirs(Dir(c)));
    EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(to, "", 0600));
  }
  int dfd = ::open(Dir(c).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Result<std::shared_ptr<BlobReader>> CheckpointFiles::Open(const CheckpointBlob& c) const {
  const std::string path = BlobPath(c);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return common::NotFound("checkpoint " + std::to_string(c.id) + " has no data");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size != c.bytes) {
    ::close(fd);
    return common::Internal("checkpoint " + std::to_string(c.id) + " data has the wrong size");
  }
  return std::make_shared<BlobReader>(fd, st.st_size);
}

void CheckpointFiles::Remove(const CheckpointBlob& c) const {
  ::unlink(PartPath(c).c_str());
  ::unlink(BlobPath(c).c_str());
}

}  // namespace controlplane::service
