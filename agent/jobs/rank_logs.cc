#include "agent/jobs/rank_logs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "common/parse_int.h"
#include "common/time_util.h"

namespace agent {
namespace {


// Most bytes read from one stream in one Collect, so a flood of output cannot exhaust memory.
constexpr size_t kMaxFoldBytes = 4 * 1024 * 1024;

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
}

std::string ReadRangeFd(int fd, int64_t offset, size_t n) {
  std::string out;
  out.resize(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, offset + static_cast<int64_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

// Opens `rel` (a path below `root` without "..") component by component, following no symbolic
// link; the last component must be of `type` (S_IFREG, S_IFDIR) and, given `owner`, owned by
// it. -1 otherwise.
int OpenBeneath(const std::string& root, const std::string& rel, mode_t type,
                std::optional<uid_t> owner) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  size_t start = 0;
  while (fd >= 0 && start <= rel.size()) {
    size_t slash = rel.find('/', start);
    bool last = slash == std::string::npos;
    std::string part = rel.substr(start, last ? std::string::npos : slash - start);
    start = last ? rel.size() + 1 : slash + 1;
    if (part.empty() || part == "." || part == "..") {
      ::close(fd);
      return -1;
    }
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (last ? 0 : O_DIRECTORY);
    int next = ::openat(fd, part.c_str(), flags);
    ::close(fd);
    fd = next;
  }
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || (st.st_mode & S_IFMT) != type || (owner && st.st_uid != *owner)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string ReadRange(const std::string& path, int64_t offset, size_t n) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(n);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, offset + static_cast<int64_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

// 0, or the errno of the failure. All or nothing: a write cut short (a full disk) is undone, so
// the retry that follows appends the same bytes once.
int AppendFile(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) return errno;
  struct stat st;
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  size_t off = 0;
  int err = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    off += static_cast<size_t>(w);
  }
  if (err != 0 && before >= 0 && ::ftruncate(fd, before) != 0) err = errno;
  ::close(fd);
  return err;
}

// Length of `s` without a trailing, incomplete UTF-8 sequence (so a chunk boundary never splits
// a character and the JSON carrying it stays valid).
size_t Utf8SafePrefix(const std::string& s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace

RankLogs::RankLogs(size_t max_batch_bytes, Caps caps)
    : max_batch_bytes_(max_batch_bytes), caps_(caps) {}

void RankLogs::SetCaps(Caps caps) {
  std::lock_guard<std::mutex> lock(mu_);
  caps_ = caps;
}

std::string RankLogs::RankLogPath(const std::string& log_dir, int rank) {
  if (rank < 0) return log_dir + "/launcher.log";
  return log_dir + "/rank-" + std::to_string(rank) + ".log";
}

void RankLogs::AddJob(int64_t job_id, const std::string& job_dir, const std::string& log_dir,
                      int ranks, std::optional<uid_t> owner, int attempt,
                      std::map<int, int64_t> base_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Job& job = jobs_[job_id];
  job = Job{};
  job.dir = job_dir;
  job.log_dir = log_dir;
  job.owner = owner;
  job.world_size = std::max(1, ranks);
  job.attempt = attempt;
  job.base_bytes = std::move(base_bytes);
  job.allowance = static_cast<double>(caps_.burst_bytes);
  job.refilled_ms = common::NowMillis();
  job.ranks[-1].path = RankLogPath(log_dir, -1);
  job.ranks[-1].base = BaseOf(job, -1);
}

// Directory entries of `rel` below the job directory (subdirectories only).
static std::vector<std::string> SubdirsBeneath(const std::string& root, const std::string& rel,
                                               std::optional<uid_t> owner) {
  std::vector<std::string> out;
  int fd = OpenBeneath(root, rel, S_IFDIR, owner);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      out.push_back(e->d_name);
    }
  }
  ::closedir(d);
  return out;
}

int64_t RankLogs::BaseOf(const Job& job, int rank) {
  auto it = job.base_bytes.find(rank);
  return it == job.base_bytes.end() ? 0 : std::max<int64_t>(0, it->second);
}

// Finds <dir>/ranks/rank.N (and <dir>/ranks/<jobid>/rank.N, the layout without `nojobid`).
void RankLogs::DiscoverRanks(Job* job) {
  auto consider = [&](const std::string& rel, const std::string& name) {
    if (name.rfind("rank.", 0) != 0) return;
    const auto parsed = common::ParseInt(std::string_view(name).substr(5), 0, job->world_size - 1);
    if (!parsed.ok()) return;
    const int rank = *parsed;
    RankFile& rf = job->ranks[rank];
    rf.base = BaseOf(*job, rank);
    if (!rf.sources.empty()) return;
    rf.path = RankLogPath(job->log_dir, rank);
    rf.sources = {{rel + "/stdout", 0}, {rel + "/stderr", 0}};
  };
  for (const auto& name : SubdirsBeneath(job->dir, "ranks", job->owner)) {
    consider("ranks/" + name, name);
    if (name.rfind("rank.", 0) == 0) continue;
    for (const auto& inner : SubdirsBeneath(job->dir, "ranks/" + name, job->owner)) {
      consider("ranks/" + name + "/" + inner, inner);
    }
  }
}

int RankLogs::FoldSource(const Job& job, const std::string& dest, Source* src, bool final,
                         int64_t* budget, int64_t* dropped) {
  int fd = OpenBeneath(job.dir, src->path, S_IFREG, job.owner);
  if (fd < 0) return 0;
  struct stat st;
  int64_t size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  int err = FoldFrom(fd, size, dest, src, final, budget, dropped);
  ::close(fd);
  return err;
}

int RankLogs::FoldFrom(int fd, int64_t size, const std::string& dest, Source* src, bool final,
                       int64_t* budget, int64_t* dropped) {
  while (size > src->consumed) {
    if (*budget <= 0) {
      // Over the cap: skipped unread, never kept.
      *dropped += size - src->consumed;
      src->consumed = size;
      return 0;
    }
    size_t n = static_cast<size_t>(
        std::min<int64_t>({size - src->consumed, static_cast<int64_t>(kMaxFoldBytes), *budget}));
    std::string data = ReadRangeFd(fd, src->consumed, n);
    if (data.empty()) return 0;
    size_t take = data.size();
    if (!final) {
      size_t nl = data.rfind('\n');
      if (nl != std::string::npos) {
        take = nl + 1;
      } else if (data.size() < kMaxPartialLine && static_cast<int64_t>(data.size()) < *budget) {
        return 0;  // wait for the rest of the line
      }
    }
    data.resize(take);
    if (int err = AppendFile(dest, data); err != 0) return err;
    src->consumed += static_cast<int64_t>(take);
    *budget -= static_cast<int64_t>(take);
    if (take < n) return 0;
  }
  return 0;
}

void RankLogs::Collect(int64_t job_id, bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  DiscoverRanks(&job);
  // The rate cap is a token bucket of `burst_bytes`, topped up at `bytes_per_s`.
  const int64_t now = common::NowMillis();
  job.allowance = std::min<double>(
      static_cast<double>(caps_.burst_bytes),
      job.allowance + static_cast<double>(caps_.bytes_per_s) *
                          static_cast<double>(std::max<int64_t>(0, now - job.refilled_ms)) / 1e3);
  job.refilled_ms = now;
  for (auto& [rank, rf] : job.ranks) {
    int64_t dropped = 0;
    for (auto& src : rf.sources) {
      const int64_t left = caps_.total_bytes - job.folded;
      int64_t budget = std::min<int64_t>(static_cast<int64_t>(job.allowance), left);
      const int64_t before = budget;
      int err = FoldSource(job, rf.path, &src, final, &budget, &dropped);
      job.folded += before - budget;
      job.allowance -= static_cast<double>(before - budget);
      if (err != 0 && job.write_error.empty()) {
        job.write_error = "cannot write " + rf.path + ": " + std::strerror(err);
        common::LogWarn("cannot fold a rank's log",
                        {{"job", std::to_string(job_id)}, {"error", job.write_error}});
      }
    }
    if (dropped == 0) continue;
    // A marker where the output was cut, so a reader knows the log is not whole. Reaching the
    // total cap marks each rank cut in that collection once; after it, silence.
    std::string marker;
    if (job.folded >= caps_.total_bytes) {
      if (!job.total_reached) {
        marker = "\n[embody: this job's logs reached their cap of " +
                 std::to_string(caps_.total_bytes >> 20) +
                 " MiB; further output is dropped]\n";
      }
    } else {
      marker = "\n[embody: dropped " + std::to_string(dropped) +
               " bytes of this rank's output: over the job's log rate of " +
               std::to_string(caps_.bytes_per_s >> 20) + " MiB/s]\n";
    }
    if (!marker.empty()) (void)AppendFile(rf.path, marker);
  }
  if (job.folded >= caps_.total_bytes) job.total_reached = true;
}

std::string RankLogs::WriteError(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? std::string() : it->second.write_error;
}

void RankLogs::CollectAll() {
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      if (!job.finished) ids.push_back(id);
    }
  }
  for (int64_t id : ids) Collect(id, /*final=*/false);
}

void RankLogs::MarkFinished(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.finished = true;
}

bool RankLogs::Tracking(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.count(job_id) > 0;
}

RankLogs::Batch RankLogs::NextBatch() {
  std::lock_guard<std::mutex> lock(mu_);
  struct Pending {
    int64_t job_id;
    int rank;
    const RankFile* file;
    int64_t size;
    int attempt;
    size_t take = 0;
  };
  std::vector<Pending> pending;
  Batch batch;
  for (const auto& [id, job] : jobs_) {
    bool complete = job.finished;
    for (const auto& [rank, rf] : job.ranks) {
      int64_t size = FileSize(rf.path);
      if (size > rf.acked) pending.push_back({id, rank, &rf, size, job.attempt});
    }
    if (complete) batch.complete_jobs.insert(id);
  }
  // More files with new bytes than a batch holds: this batch takes kMaxBatchChunks of them,
  // starting where the last one stopped, so every file is shipped in turn.
  if (pending.size() > kMaxBatchChunks) {
    const size_t from = batch_turn_ % pending.size();
    std::rotate(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(from), pending.end());
    for (size_t i = kMaxBatchChunks; i < pending.size(); ++i) {
      batch.complete_jobs.erase(pending[i].job_id);  // bytes of theirs wait for a later batch
    }
    pending.resize(kMaxBatchChunks);
    batch_turn_ = from + kMaxBatchChunks;
  }
  // Fair share first, then the leftover in order, so one chatty rank cannot starve the others.
  size_t budget = max_batch_bytes_;
  if (!pending.empty()) {
    size_t share = std::max<size_t>(1, budget / pending.size());
    for (auto& p : pending) {
      p.take = std::min<size_t>(static_cast<size_t>(p.size - p.file->acked), share);
      budget -= std::min(budget, p.take);
    }
    for (auto& p : pending) {
      size_t more = std::min<size_t>(static_cast<size_t>(p.size - p.file->acked) - p.take, budget);
      p.take += more;
      budget -= more;
    }
  }
  for (auto& p : pending) {
    if (p.take == 0) {
      batch.complete_jobs.erase(p.job_id);
      continue;
    }
    std::string data = ReadRange(p.file->path, p.file->acked, p.take);
    bool all = p.file->acked + static_cast<int64_t>(data.size()) == p.size;
    if (!all) data.resize(Utf8SafePrefix(data));
    if (!all || data.empty()) batch.complete_jobs.erase(p.job_id);
    if (data.empty()) continue;
    batch.chunks.push_back(
        {p.job_id, p.rank, p.file->base + p.file->acked, std::move(data), p.attempt});
  }
  return batch;
}

void RankLogs::Commit(const std::vector<api::LogChunk>& shipped) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : shipped) {
    auto job = jobs_.find(c.job_id);
    if (job == jobs_.end()) continue;
    auto rf = job->second.ranks.find(c.rank);
    if (rf == job->second.ranks.end()) continue;
    if (c.attempt != job->second.attempt) continue;  // shipped for an attempt since replaced
    rf->second.acked = std::max(
        rf->second.acked, c.offset - rf->second.base + static_cast<int64_t>(c.data.size()));
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    bool done = it->second.finished;
    for (const auto& [rank, rf] : it->second.ranks) {
      if (FileSize(rf.path) > rf.acked) done = false;
    }
    it = done ? jobs_.erase(it) : std::next(it);
  }
}

}  // namespace agent
