// LerobotDataFiles: an episode's low-dimensional rows (action, state) read from its data file,
// each file decoded once and shared between the threads that ask for it, and checked row by row
// (contiguous, frame and global indices in order, timestamps at the dataset's fps).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <list>
#include <memory>
#include <mutex>

#include "storage/lerobot_dataset.h"
#include "storage/lerobot_dataset_internal.h"

namespace storage {

namespace {

namespace fs = std::filesystem;
using lerobot_internal::RequiredFlat;

// A data file's columns, read whole.
struct FrameTable {
  std::string path;
  int64_t rows = 0;
  parquet::ListColumn<float> action, state;
  std::vector<double> timestamp;
  std::vector<int64_t> frame_index, episode_index, index;
};

common::Result<parquet::ListColumn<float>> ReadVectors(const parquet::ParquetFile& f,
                                                       const std::string& name, int dim) {
  EMBODY_ASSIGN_OR_RETURN(col, parquet::ReadListColumn<float>(f, name));
  auto bad = [&](const std::string& msg) {
    return common::InvalidArgument(f.name() + ": column '" + name + "': " + msg);
  };
  for (int64_t r = 0; r < col.rows(); ++r) {
    const size_t i = static_cast<size_t>(r);
    if (!col.valid.empty() && !col.valid[i]) return bad("null in row " + std::to_string(r));
    if (col.offsets[i + 1] - col.offsets[i] != dim) {
      return bad("row " + std::to_string(r) + " has " +
                 std::to_string(col.offsets[i + 1] - col.offsets[i]) +
                 " values, info.json's shape is [" + std::to_string(dim) + "]");
    }
  }
  for (size_t k = 0; k < col.values.size(); ++k) {
    if ((!col.value_valid.empty() && !col.value_valid[k]) || !std::isfinite(col.values[k])) {
      return bad("row " + std::to_string(static_cast<int64_t>(k) / dim) + " element " +
                 std::to_string(static_cast<int64_t>(k) % dim) + " is null or not finite");
    }
  }
  return col;
}

common::Result<std::shared_ptr<const FrameTable>> ReadFrameTable(const LerobotLayout& layout,
                                                                 const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return common::InvalidArgument(path + ": missing");
  EMBODY_ASSIGN_OR_RETURN(f, parquet::ParquetFile::Open(path));
  auto t = std::make_shared<FrameTable>();
  t->path = path;
  t->rows = f->num_rows();
  EMBODY_ASSIGN_OR_RETURN(action, ReadVectors(*f, "action", layout.action_dim));
  t->action = std::move(action);
  if (layout.state_dim > 0) {
    EMBODY_ASSIGN_OR_RETURN(state, ReadVectors(*f, "observation.state", layout.state_dim));
    t->state = std::move(state);
  }
  EMBODY_ASSIGN_OR_RETURN(ts, RequiredFlat<double>(*f, "timestamp"));
  EMBODY_ASSIGN_OR_RETURN(fi, RequiredFlat<int64_t>(*f, "frame_index"));
  EMBODY_ASSIGN_OR_RETURN(ei, RequiredFlat<int64_t>(*f, "episode_index"));
  EMBODY_ASSIGN_OR_RETURN(ix, RequiredFlat<int64_t>(*f, "index"));
  t->timestamp = std::move(ts);
  t->frame_index = std::move(fi);
  t->episode_index = std::move(ei);
  t->index = std::move(ix);
  for (int64_t n :
       {t->action.rows(), layout.state_dim > 0 ? t->state.rows() : t->rows,
        static_cast<int64_t>(t->timestamp.size()), static_cast<int64_t>(t->frame_index.size()),
        static_cast<int64_t>(t->episode_index.size()), static_cast<int64_t>(t->index.size())}) {
    if (n != t->rows) {
      return common::InvalidArgument(path + ": columns have different row counts");
    }
  }
  return std::shared_ptr<const FrameTable>(std::move(t));
}

}  // namespace

// Decoded files by path; a file is read once by whichever thread asks first, the others wait
// on its future. The oldest entries are dropped past `keep` (readers still holding one keep it
// alive).
struct LerobotDataFiles::Cache {
  using Entry = std::shared_future<common::Result<std::shared_ptr<const FrameTable>>>;
  std::mutex mu;
  size_t keep = 2;
  std::list<std::pair<std::string, Entry>> entries;  // newest first
};

LerobotDataFiles::LerobotDataFiles(size_t keep) : cache_(std::make_unique<Cache>()) {
  cache_->keep = std::max<size_t>(1, keep);
}
LerobotDataFiles::~LerobotDataFiles() = default;

common::Result<LerobotFrames> LerobotDataFiles::Read(const LerobotLayout& layout,
                                                     const LerobotEpisodeRef& ep) {
  Cache::Entry entry;
  std::promise<common::Result<std::shared_ptr<const FrameTable>>> promise;
  bool reader = false;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = std::find_if(cache_->entries.begin(), cache_->entries.end(),
                           [&](const auto& e) { return e.first == ep.data_path; });
    if (it != cache_->entries.end()) {
      entry = it->second;
    } else {
      entry = promise.get_future().share();
      cache_->entries.emplace_front(ep.data_path, entry);
      if (cache_->entries.size() > cache_->keep) cache_->entries.pop_back();
      reader = true;
    }
  }
  if (reader) promise.set_value(ReadFrameTable(layout, ep.data_path));
  const auto& table_or = entry.get();
  const std::string what = layout.dir + " episode " + std::to_string(ep.index);
  if (!table_or.ok())
    return common::Status(table_or.status().code(), what + ": " + table_or.status().message());
  const FrameTable& t = **table_or;
  auto bad = [&](const std::string& msg) {
    return common::InvalidArgument(what + ": " + t.path + ": " + msg);
  };
  // The episode's rows: one contiguous run of its episode_index.
  auto first = std::find(t.episode_index.begin(), t.episode_index.end(), ep.index);
  if (first == t.episode_index.end()) return bad("no rows with this episode_index");
  const int64_t r0 = first - t.episode_index.begin();
  int64_t n = 0;
  while (r0 + n < t.rows && t.episode_index[static_cast<size_t>(r0 + n)] == ep.index) ++n;
  if (std::find(t.episode_index.begin() + r0 + n, t.episode_index.end(), ep.index) !=
      t.episode_index.end()) {
    return bad("the episode's rows are not contiguous");
  }
  if (n != ep.length) {
    return bad(std::to_string(n) + " rows, the episode metadata says length " +
               std::to_string(ep.length));
  }
  const double period = 1.0 / layout.fps;
  const int64_t index0 = ep.from_index >= 0 ? ep.from_index : t.index[static_cast<size_t>(r0)];
  for (int64_t i = 0; i < n; ++i) {
    const size_t r = static_cast<size_t>(r0 + i);
    if (t.frame_index[r] != i) {
      return bad("row " + std::to_string(r) + ": frame_index is " +
                 std::to_string(t.frame_index[r]) + ", expected " + std::to_string(i) +
                 " (frames missing or out of order)");
    }
    if (t.index[r] != index0 + i) {
      return bad("row " + std::to_string(r) + ": index is " + std::to_string(t.index[r]) +
                 ", expected " + std::to_string(index0 + i));
    }
    if (!(std::fabs(t.timestamp[r] - static_cast<double>(i) * period) <= period)) {
      return bad("row " + std::to_string(r) + ": timestamp " + std::to_string(t.timestamp[r]) +
                 " is more than 1/fps from frame " + std::to_string(i) + " at " +
                 std::to_string(layout.fps) + " fps");
    }
  }
  LerobotFrames out;
  out.length = n;
  const auto a0 = t.action.values.begin() + t.action.offsets[static_cast<size_t>(r0)];
  out.action.assign(a0, a0 + n * layout.action_dim);
  if (layout.state_dim > 0) {
    const auto s0 = t.state.values.begin() + t.state.offsets[static_cast<size_t>(r0)];
    out.state.assign(s0, s0 + n * layout.state_dim);
  }
  return out;
}

}  // namespace storage
