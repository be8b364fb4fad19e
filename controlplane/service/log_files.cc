#include "controlplane/service/log_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/file_util.h"

namespace controlplane::service {

std::string LogFiles::JobDir(int64_t job_id) const {
  return data_dir_ + "/logs/job-" + std::to_string(job_id);
}

std::string LogFiles::PathFor(int64_t job_id, int attempt, int rank) const {
  std::string dir = JobDir(job_id) + "/attempt-" + std::to_string(attempt);
  return dir + (rank < 0 ? std::string("/launcher.log") : "/rank-" + std::to_string(rank) + ".log");
}

Result<int64_t> LogFiles::Append(const api::LogChunk& chunk) const {
  if (chunk.attempt < 0) return common::InvalidArgument("log chunk without its attempt");
  const std::string path = PathFor(chunk.job_id, chunk.attempt, chunk.rank);
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(path.substr(0, path.rfind('/'))));
  struct stat st {};
  int64_t size = 0;
  if (::stat(path.c_str(), &st) == 0) size = st.st_size;
  const int64_t end = chunk.offset + static_cast<int64_t>(chunk.data.size());
  if (end <= size) return size;  // every byte is there already
  size_t skip = chunk.offset < size ? static_cast<size_t>(size - chunk.offset) : 0;
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(chunk.data.data() + skip, static_cast<std::streamsize>(chunk.data.size() - skip));
  out.close();
  if (!out) return common::Internal("cannot append to " + path + ": " + std::strerror(errno));
  return size + static_cast<int64_t>(chunk.data.size() - skip);
}

Result<std::string> LogFiles::Read(const std::string& path, int64_t offset, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (offset >= size) return std::string();
  const size_t n = std::min<size_t>(max_bytes, static_cast<size_t>(size - offset));
  std::string buf(n, '\0');
  in.seekg(offset);
  in.read(buf.data(), static_cast<std::streamsize>(n));
  buf.resize(static_cast<size_t>(in.gcount()));
  return buf;
}

std::string RankPrefix(int rank) {
  return rank < 0 ? std::string("[launcher] ") : "[rank " + std::to_string(rank) + "] ";
}

Result<std::string> LogMerger::Poll(const std::vector<LogRecord>& logs, bool final) {
  constexpr size_t kMaxPerPoll = 1 << 20;
  std::string out;
  for (const LogRecord& log : logs) {
    Cursor& c = cursors_[log.rank];
    EMBODY_ASSIGN_OR_RETURN(data, LogFiles::Read(log.path, c.offset, kMaxPerPoll));
    c.offset += static_cast<int64_t>(data.size());
    c.partial += data;
    size_t start = 0;
    for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += RankPrefix(log.rank);
      out.append(c.partial, start, nl - start + 1);
    }
    c.partial.erase(0, start);
    if (final && !c.partial.empty()) {
      out += RankPrefix(log.rank) + c.partial + "\n";
      c.partial.clear();
    }
  }
  return out;
}

}  // namespace controlplane::service
