#include "agent/rank_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace agent {
namespace {

namespace fs = std::filesystem;

// Most bytes read from one stream in one Collect, so a flood of output cannot exhaust memory.
constexpr size_t kMaxFoldBytes = 4 * 1024 * 1024;

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
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

bool AppendFile(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  ::close(fd);
  return off == data.size();
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

RankLogs::RankLogs(size_t max_batch_bytes) : max_batch_bytes_(max_batch_bytes) {}

std::string RankLogs::RankLogPath(const std::string& job_dir, int rank) {
  if (rank < 0) return job_dir + "/launcher.log";
  return job_dir + "/rank-" + std::to_string(rank) + ".log";
}

void RankLogs::AddJob(int64_t job_id, const std::string& job_dir) {
  std::lock_guard<std::mutex> lock(mu_);
  Job& job = jobs_[job_id];
  job = Job{};
  job.dir = job_dir;
  job.ranks[-1].path = RankLogPath(job_dir, -1);
}

// Finds <dir>/ranks/rank.N (and <dir>/ranks/<jobid>/rank.N, the layout without `nojobid`).
void RankLogs::DiscoverRanks(Job* job) {
  std::error_code ec;
  fs::path root = fs::path(job->dir) / "ranks";
  if (!fs::is_directory(root, ec)) return;
  auto consider = [&](const fs::path& p) {
    std::string name = p.filename().string();
    if (name.rfind("rank.", 0) != 0) return;
    char* end = nullptr;
    long rank = std::strtol(name.c_str() + 5, &end, 10);
    if (end == name.c_str() + 5 || *end != '\0' || rank < 0) return;
    RankFile& rf = job->ranks[static_cast<int>(rank)];
    if (!rf.sources.empty()) return;
    rf.path = RankLogPath(job->dir, static_cast<int>(rank));
    rf.sources = {{(p / "stdout").string(), 0}, {(p / "stderr").string(), 0}};
  };
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory(ec)) continue;
    consider(e.path());
    for (const auto& inner : fs::directory_iterator(e.path(), ec)) {
      if (inner.is_directory(ec)) consider(inner.path());
    }
  }
}

void RankLogs::FoldSource(const std::string& dest, Source* src, bool final) {
  int64_t size = FileSize(src->path);
  while (size > src->consumed) {
    size_t n = static_cast<size_t>(std::min<int64_t>(size - src->consumed, kMaxFoldBytes));
    std::string data = ReadRange(src->path, src->consumed, n);
    if (data.empty()) return;
    size_t take = data.size();
    if (!final) {
      size_t nl = data.rfind('\n');
      if (nl != std::string::npos) {
        take = nl + 1;
      } else if (data.size() < kMaxPartialLine) {
        return;  // wait for the rest of the line
      }
    }
    data.resize(take);
    if (!AppendFile(dest, data)) return;
    src->consumed += static_cast<int64_t>(take);
    if (take < n) return;
  }
}

void RankLogs::Collect(int64_t job_id, bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  DiscoverRanks(&job);
  for (auto& [rank, rf] : job.ranks) {
    for (auto& src : rf.sources) FoldSource(rf.path, &src, final);
  }
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
    size_t take = 0;
  };
  std::vector<Pending> pending;
  Batch batch;
  for (const auto& [id, job] : jobs_) {
    bool complete = job.finished;
    for (const auto& [rank, rf] : job.ranks) {
      int64_t size = FileSize(rf.path);
      if (size > rf.acked) pending.push_back({id, rank, &rf, size});
    }
    if (complete) batch.complete_jobs.insert(id);
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
    batch.chunks.push_back({p.job_id, p.rank, p.file->acked, std::move(data)});
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
    rf->second.acked = std::max(rf->second.acked, c.offset + static_cast<int64_t>(c.data.size()));
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
