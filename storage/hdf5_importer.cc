#include "storage/hdf5_importer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "storage/hdf5_file.h"

namespace storage {

namespace {

// demo_<digits> -> its number; nullopt for any other name.
std::optional<uint64_t> DemoNumber(const std::string& name) {
  if (name.rfind("demo_", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return std::nullopt;
  uint64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return n;
}

common::Result<std::vector<std::string>> DemosInOrder(const Hdf5File& f) {
  EMBODY_ASSIGN_OR_RETURN(members, f.List("data"));
  std::vector<std::pair<uint64_t, std::string>> demos;
  for (const auto& m : members) {
    auto n = DemoNumber(m.name);
    if (n && m.kind == Hdf5File::Kind::kGroup) demos.emplace_back(*n, m.name);
  }
  std::sort(demos.begin(), demos.end());
  std::vector<std::string> out;
  for (auto& d : demos) out.push_back(std::move(d.second));
  return out;
}

bool IsImageName(const std::string& key) {
  return key.rfind("obs/", 0) == 0 && key.find("image") != std::string::npos;
}

template <typename T>
int64_t FirstNonFinite(const Array& a) {
  const T* v = reinterpret_cast<const T*>(a.data.data());
  int64_t n = a.frames * a.spec.FrameElements();
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return i;
  }
  return -1;
}

struct DemoResult {
  Episode episode;
  bool non_finite_actions = false;
  std::string non_finite_detail;
};

// Reads and checks one demo. `first` is the first imported demo's schema (null for the first).
common::Result<DemoResult> ReadDemo(const Hdf5File& f, const std::string& demo,
                                    const Hdf5ImportOptions& options, const std::string& language,
                                    const Schema* first) {
  const std::string what = f.path() + " " + demo;
  auto bad = [&](const std::string& msg) { return common::InvalidArgument(what + ": " + msg); };
  const std::string group = "data/" + demo;

  // (HDF5 path, key) of every per-frame dataset, in key order.
  std::vector<std::pair<std::string, std::string>> keys;
  EMBODY_ASSIGN_OR_RETURN(members, f.List(group));
  for (const auto& m : members) {
    if (m.kind == Hdf5File::Kind::kDataset) {
      keys.emplace_back(group + "/" + m.name, m.name);
    } else if (m.kind == Hdf5File::Kind::kGroup && m.name == "obs") {
      EMBODY_ASSIGN_OR_RETURN(obs, f.List(group + "/obs"));
      for (const auto& o : obs) {
        if (o.kind == Hdf5File::Kind::kDataset)
          keys.emplace_back(group + "/obs/" + o.name, "obs/" + o.name);
      }
    }
  }
  std::sort(keys.begin(), keys.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  auto has = [&](const std::string& k) {
    return std::any_of(keys.begin(), keys.end(), [&](const auto& p) { return p.second == k; });
  };
  if (!has("actions")) return bad("no actions dataset");
  EMBODY_ASSIGN_OR_RETURN(action_dims, f.Dims(group + "/actions"));
  if (action_dims.size() != 2 || action_dims[1] <= 0) {
    return bad("actions must be (T, action_dim), found rank " + std::to_string(action_dims.size()));
  }
  int64_t frames = action_dims[0];
  if (frames <= 0) return bad("no frames");
  if (frames > options.max_episode_frames) {
    return bad(std::to_string(frames) + " frames, more than the maximum of " +
               std::to_string(options.max_episode_frames));
  }
  if (f.HasAttribute(group, "num_samples")) {
    EMBODY_ASSIGN_OR_RETURN(n, f.ReadIntAttribute(group, "num_samples"));
    if (n != frames) {
      return bad("num_samples attribute says " + std::to_string(n) + " frames, actions has " +
                 std::to_string(frames));
    }
  }
  if (first) {
    std::set<std::string> want, got;
    for (const KeySpec& k : *first) want.insert(k.name);
    for (const auto& [path, key] : keys) got.insert(key);
    for (const auto& k : want) {
      if (!got.count(k)) return bad("key " + k + " is missing (the first demo has it)");
    }
    for (const auto& k : got) {
      if (!want.count(k)) return bad("key " + k + " is not in the first demo");
    }
  }
  // Shapes first, from metadata: a bad key is refused before anything large is read.
  for (const auto& [path, key] : keys) {
    EMBODY_ASSIGN_OR_RETURN(dims, f.Dims(path));
    if (dims.empty()) return bad("key " + key + " is a scalar, not one value per frame");
    if (dims[0] != frames) {
      return bad("key " + key + " has " + std::to_string(dims[0]) + " frames, actions has " +
                 std::to_string(frames));
    }
    if ((key == "rewards" || key == "dones") && dims.size() != 1) {
      return bad("key " + key + " must be (T), found rank " + std::to_string(dims.size()));
    }
    if (IsImageName(key) && (dims.size() != 4 || (dims[3] != 1 && dims[3] != 3 && dims[3] != 4))) {
      return bad("image key " + key + " must be (T, H, W, C) with C in {1,3,4}");
    }
    uint64_t frame_elems = 1;
    for (size_t i = 1; i < dims.size(); ++i) {
      frame_elems *= static_cast<uint64_t>(dims[i]);
      if (dims[i] <= 0 || frame_elems > (1u << 28))
        return bad("key " + key + " has a bad frame shape");
    }
  }

  DemoResult out;
  Episode& ep = out.episode;
  for (const auto& [path, key] : keys) {
    auto a = f.ReadArray(path, key);
    if (!a.ok()) return bad(a.status().message());
    if (IsImageName(key) && a->spec.dtype != DType::kU8) {
      return bad("image key " + key + " must be uint8, found " + DTypeName(a->spec.dtype));
    }
    if (first) {
      auto it = std::find_if(first->begin(), first->end(),
                             [&](const KeySpec& k) { return k.name == key; });
      if (!(*it == a->spec)) {
        return bad("key " + a->spec.ToString() + " differs from the first demo's " +
                   it->ToString());
      }
    }
    ep.arrays.push_back(std::move(*a));
  }
  const Array* actions = ep.Find("actions");
  int64_t bad_at = -1;
  if (actions->spec.dtype == DType::kF32) bad_at = FirstNonFinite<float>(*actions);
  if (actions->spec.dtype == DType::kF64) bad_at = FirstNonFinite<double>(*actions);
  if (bad_at >= 0) {
    int64_t dim = actions->spec.FrameElements();
    out.non_finite_actions = true;
    out.non_finite_detail = what + ": actions frame " + std::to_string(bad_at / dim) + " element " +
                            std::to_string(bad_at % dim) + " is NaN or Inf";
  }
  ep.attributes.emplace_back(kAttrDemoName, demo);
  ep.attributes.emplace_back(kAttrSourceFile, f.path());
  if (!language.empty()) ep.attributes.emplace_back(kAttrLanguage, language);
  return out;
}

// Writes episodes on a second thread so reading (and decompressing) the next demo overlaps
// checksumming and writing the previous one. Two episodes in flight at most.
class WriterThread {
 public:
  explicit WriterThread(DatasetWriter* writer) : writer_(writer), thread_([this] { Run(); }) {}
  ~WriterThread() { Close(); }

  // Queues an episode; returns the writer's first error once one has happened.
  common::Status Push(Episode episode, std::string what) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < 2 || !error_.ok(); });
    if (!error_.ok()) return error_;
    queue_.emplace_back(std::move(episode), std::move(what));
    cv_.notify_all();
    return common::Status::Ok();
  }
  // Waits for everything queued to be written.
  common::Status Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return error_;
  }

 private:
  void Run() {
    for (;;) {
      std::pair<Episode, std::string> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      common::Status st = writer_->Add(item.first, item.second);
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
      if (!st.ok()) {
        error_ = st;
        queue_.clear();
        return;
      }
    }
  }

  DatasetWriter* writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Episode, std::string>> queue_;
  bool closed_ = false;
  common::Status error_;
  std::thread thread_;
};

}  // namespace

common::Status FinishImport(DatasetWriter& writer, nlohmann::json source,
                            std::chrono::steady_clock::time_point start, ImportResult* result) {
  result->episodes = writer.episodes();
  result->frames = writer.frames();
  result->bytes = writer.bytes();
  EMBODY_ASSIGN_OR_RETURN(manifest, writer.Finish(std::move(source)));
  result->manifest = std::move(manifest);
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return common::Status::Ok();
}

common::Result<ImportResult> ImportHdf5(const std::string& input, const std::string& out_dir,
                                        const Hdf5ImportOptions& options) {
  auto start = std::chrono::steady_clock::now();
  EMBODY_ASSIGN_OR_RETURN(f, Hdf5File::Open(input));
  if (!f.Exists("data"))
    return common::InvalidArgument(input + ": no 'data' group (not a robomimic/LIBERO file)");

  nlohmann::json source = {{"type", "hdf5"}, {"path", input}};
  if (f.HasAttribute("data", "env_args")) {
    EMBODY_ASSIGN_OR_RETURN(env_args, f.ReadStringAttribute("data", "env_args"));
    source["env_args"] = env_args;
  }
  std::string language = options.language;
  if (f.HasAttribute("data", "problem_info")) {
    EMBODY_ASSIGN_OR_RETURN(info, f.ReadStringAttribute("data", "problem_info"));
    source["problem_info"] = info;
    if (language.empty()) {
      auto j = nlohmann::json::parse(info, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        return common::InvalidArgument(input + ": problem_info attribute is not a JSON object");
      }
      if (j.contains("language_instruction") && j["language_instruction"].is_string()) {
        language = j["language_instruction"].get<std::string>();
      }
    }
  }
  if (!language.empty()) source["language_instruction"] = language;

  EMBODY_ASSIGN_OR_RETURN(demos, DemosInOrder(f));
  if (!options.filter.empty()) {
    std::string mask = "mask/" + options.filter;
    if (!f.Exists(mask)) {
      std::string known;
      if (f.Exists("mask")) {
        auto filters = f.List("mask");
        if (filters.ok()) {
          for (const auto& m : *filters) known += (known.empty() ? "" : ", ") + m.name;
        }
      }
      return common::InvalidArgument(input + ": no filter key " + mask +
                                     " (filters: " + (known.empty() ? "none" : known) + ")");
    }
    EMBODY_ASSIGN_OR_RETURN(selected, f.ReadStringList(mask));
    std::set<std::string> in_file(demos.begin(), demos.end()), wanted;
    for (const std::string& d : selected) {
      if (!in_file.count(d)) {
        return common::InvalidArgument(input + ": filter " + options.filter + " names " + d +
                                       ", which is not in data/");
      }
      wanted.insert(d);
    }
    std::erase_if(demos, [&](const std::string& d) { return !wanted.count(d); });
    source["filter"] = options.filter;
  }
  if (demos.empty()) return common::InvalidArgument(input + ": no demos to import");

  EMBODY_ASSIGN_OR_RETURN(writer, DatasetWriter::Create(out_dir, options.writer));
  ImportResult result;
  ImportProgress progress;
  progress.demos_total = demos.size();
  std::optional<Schema> first;
  {
    WriterThread pipe(writer.get());
    for (const std::string& demo : demos) {
      EMBODY_ASSIGN_OR_RETURN(d, ReadDemo(f, demo, options, language, first ? &*first : nullptr));
      ++progress.demos_done;
      if (d.non_finite_actions) {
        if (options.nan_policy == NanPolicy::kRefuse) {
          return common::InvalidArgument(d.non_finite_detail +
                                         " (refused; the nan policy \"skip\" leaves such demos out)");
        }
        ++result.skipped_nan;
      } else {
        if (!first) first = d.episode.schema();
        progress.frames += static_cast<uint64_t>(d.episode.frames());
        for (const Array& a : d.episode.arrays) progress.bytes += a.data.size();
        EMBODY_RETURN_IF_ERROR(pipe.Push(std::move(d.episode), f.path() + " " + demo));
      }
      if (options.progress) options.progress(progress);
    }
    EMBODY_RETURN_IF_ERROR(pipe.Close());
  }
  if (writer->episodes() == 0) {
    return common::InvalidArgument(input + ": every demo was skipped (" +
                                   std::to_string(result.skipped_nan) + " with NaN/Inf actions)");
  }
  source["skipped_nan_demos"] = result.skipped_nan;
  EMBODY_RETURN_IF_ERROR(FinishImport(*writer, std::move(source), start, &result));
  return result;
}

}  // namespace storage
