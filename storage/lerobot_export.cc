// The export of a dataset directory as LeRobot v3.0 (lerobot_export.h): episodes are read in
// order; their low-dim rows gather in the current data file's columns and their camera frames go
// straight into each camera's current encoder; both roll over to a new file at their size limits.
// The metadata files are written last, from what was gathered on the way.
//
// This file holds the plan (which keys become which features) and the episodes' streaming; the
// meta/ files are written in lerobot_export_meta.cc.
#include "storage/lerobot_export.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "common/file_util.h"
#include "storage/lerobot_export_internal.h"
#include "storage/parquet/writer.h"

namespace storage {

namespace lerobot_export_internal {

namespace {

namespace fs = std::filesystem;

std::string FileName(const std::string& dir, int64_t chunk, int64_t file, const char* ext) {
  char name[64];
  std::snprintf(name, sizeof(name), "/chunk-%03lld/file-%03lld.%s", static_cast<long long>(chunk),
                static_cast<long long>(file), ext);
  return dir + name;
}

std::string Dotted(std::string s) {
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

bool Reserved(const std::string& feature) {
  return feature == "timestamp" || feature == "frame_index" || feature == "episode_index" ||
         feature == "index" || feature == "task_index";
}

// Element i of a row of `a` as a float, whatever the key's element type.
float ElementAsFloat(const Array& a, size_t i) {
  switch (a.spec.dtype) {
    case DType::kF32:
      return reinterpret_cast<const float*>(a.data.data())[i];
    case DType::kF64:
      return static_cast<float>(reinterpret_cast<const double*>(a.data.data())[i]);
    case DType::kI32:
      return static_cast<float>(reinterpret_cast<const int32_t*>(a.data.data())[i]);
    case DType::kU8:
      return static_cast<float>(a.data[i]);
  }
  return 0;
}

}  // namespace

common::Status Exporter::Plan(LerobotExportResult* result) {
  const Schema& schema = ds_.schema();
  std::set<std::string> features;
  for (size_t k = 0; k < schema.size(); ++k) {
    const KeySpec& s = schema[k];
    const auto& shape = s.frame_shape;
    if (s.dtype == DType::kU8 && shape.size() == 3 && shape[2] == 3 && s.name.rfind("obs/", 0) == 0) {
      Camera c{k, "observation.images." + Dotted(s.name.substr(4)), static_cast<int>(shape[0]),
               static_cast<int>(shape[1])};
      if (c.height % 2 || c.width % 2) {
        return common::InvalidArgument(s.name + ": frames of " + std::to_string(c.height) + "x" +
                                       std::to_string(c.width) +
                                       " cannot be encoded as yuv420p video (height and width "
                                       "must be even)");
      }
      features.insert(c.feature);
      cams_.push_back(c);
      continue;
    }
    if (s.dtype == DType::kU8 || shape.size() > 1) {
      result->ignored_keys.push_back(s.name);
      continue;
    }
    std::string feature = s.name == "actions"     ? "action"
                          : s.name == "obs/state" ? "observation.state"
                          : s.name.rfind("obs/", 0) == 0 ? "observation." + Dotted(s.name.substr(4))
                                                         : Dotted(s.name);
    if (Reserved(feature) || !features.insert(feature).second) {
      result->ignored_keys.push_back(s.name);
      continue;
    }
    low_.push_back({k, feature, shape.empty() ? 1 : shape[0], shape.empty()});
  }
  if (std::none_of(low_.begin(), low_.end(), [](const LowDim& l) { return l.feature == "action"; })) {
    return common::InvalidArgument(
        "the dataset has no 'actions' key, which LeRobot's 'action' feature needs");
  }
  for (const LowDim& l : low_) low_stats_.emplace_back(l.dim);
  for (size_t c = 0; c < cams_.size(); ++c) cam_stats_.emplace_back(3);
  data_.low.resize(low_.size());
  encoders_.resize(cams_.size());
  video_at_.resize(cams_.size());
  episodes_.video_chunk.resize(cams_.size());
  episodes_.video_file.resize(cams_.size());
  episodes_.video_from.resize(cams_.size());
  episodes_.video_to.resize(cams_.size());
  return common::Status::Ok();
}

common::Status Exporter::AddEpisode(uint64_t e, const Episode& ep) {
  const std::string what = ds_.DescribeEpisode(e);
  const int64_t n = ep.frames();
  const std::string task = ep.Attribute(kAttrLanguage);
  auto [it, added] = task_index_.emplace(task, static_cast<int64_t>(tasks_.size()));
  if (added) tasks_.push_back(task);
  const int64_t first = frames_;

  // Low-dim rows.
  for (size_t i = 0; i < low_.size(); ++i) {
    const Array* a = ep.Find(ds_.schema()[low_[i].key].name);
    if (!a || a->frames != n) return common::Internal(what + ": key missing or short");
    std::vector<float>& col = data_.low[i];
    const size_t count = static_cast<size_t>(n * low_[i].dim);
    const size_t at = col.size();
    col.resize(at + count);
    for (size_t j = 0; j < count; ++j) {
      col[at + j] = ElementAsFloat(*a, j);
      if (!std::isfinite(col[at + j])) {
        return common::InvalidArgument(what + ": key " + a->spec.name + " has a non-finite value at frame " +
                                       std::to_string(j / low_[i].dim));
      }
      low_stats_[i].Add(col[at + j], j % static_cast<size_t>(low_[i].dim));
    }
    low_stats_[i].Count(n, n);
    data_.bytes += static_cast<int64_t>(count) * 4;
  }
  for (int64_t f = 0; f < n; ++f) {
    const double values[5] = {static_cast<float>(f / fps_), static_cast<double>(f),
                              static_cast<double>(e), static_cast<double>(first + f),
                              static_cast<double>(it->second)};
    data_.timestamp.push_back(static_cast<float>(values[0]));
    data_.frame_index.push_back(f);
    data_.episode_index.push_back(static_cast<int64_t>(e));
    data_.index.push_back(first + f);
    data_.task_index.push_back(it->second);
    for (int k = 0; k < 5; ++k) frame_stats_[k].Add(values[k], 0);
  }
  for (auto& s : frame_stats_) s.Count(n, n);
  data_.bytes += n * 36;
  episodes_.episode_index.push_back(static_cast<int64_t>(e));
  episodes_.length.push_back(n);
  episodes_.tasks.push_back({task});
  episodes_.data_chunk.push_back(data_at_.chunk);
  episodes_.data_file.push_back(data_at_.file);
  episodes_.from_index.push_back(first);
  episodes_.to_index.push_back(first + n);

  // Camera frames, into each camera's current file.
  for (size_t c = 0; c < cams_.size(); ++c) {
    const Camera& cam = cams_[c];
    const Array* a = ep.Find(ds_.schema()[cam.key].name);
    if (!a || a->frames != n) return common::Internal(what + ": camera key missing or short");
    auto& enc = encoders_[c];
    if (enc && enc->bytes() >= o_.video_files_size_in_mb << 20) {
      EMBODY_RETURN_IF_ERROR(enc->Finish());
      enc.reset();
      video_at_[c].Next(o_.chunks_size);
    }
    if (!enc) {
      const std::string path =
          FileName(out_ + "/videos/" + cam.feature, video_at_[c].chunk, video_at_[c].file, "mp4");
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path(), ec);
      if (ec) return common::Internal("mkdir " + path + ": " + ec.message());
      VideoEncodeOptions vo{.codec = o_.codec, .fps = fps_, .crf = o_.crf, .gop = o_.gop};
      EMBODY_ASSIGN_OR_RETURN(opened, VideoEncoder::Open(path, cam.height, cam.width, vo));
      enc = std::move(opened);
      video_encoder_ = enc->encoder();
      ++video_files_;
    }
    episodes_.video_chunk[c].push_back(video_at_[c].chunk);
    episodes_.video_file[c].push_back(video_at_[c].file);
    episodes_.video_from[c].push_back(static_cast<double>(enc->frames()) / fps_);
    common::Status st = enc->Add(a->data.data(), n);
    if (!st.ok()) return common::Internal(what + ": " + st.message());
    episodes_.video_to[c].push_back(static_cast<double>(enc->frames()) / fps_);
    const size_t pixels = static_cast<size_t>(cam.height) * cam.width;
    uint64_t sum[3] = {}, sumsq[3] = {};
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (size_t p = 0; p < pixels * static_cast<size_t>(n); ++p) {
      for (int ch = 0; ch < 3; ++ch) {
        const uint8_t v = a->data[p * 3 + ch];
        sum[ch] += v;
        sumsq[ch] += uint64_t{v} * v;
        lo[ch] = std::min(lo[ch], v);
        hi[ch] = std::max(hi[ch], v);
      }
    }
    for (int ch = 0; ch < 3; ++ch) cam_stats_[c].AddSums(ch, static_cast<double>(sum[ch]), static_cast<double>(sumsq[ch]), lo[ch], hi[ch]);
    cam_stats_[c].Count(n, static_cast<int64_t>(pixels) * n);
  }
  frames_ += n;
  if (data_.bytes >= o_.data_files_size_in_mb << 20) {
    EMBODY_RETURN_IF_ERROR(FlushData());
    data_at_.Next(o_.chunks_size);
  }
  return common::Status::Ok();
}

common::Status Exporter::FlushData() {
  if (data_.rows() == 0) return common::Status::Ok();
  parquet::TableWriter w;
  const int64_t rows = data_.rows();
  for (size_t i = 0; i < low_.size(); ++i) {
    if (low_[i].scalar) {
      w.AddFloat(low_[i].feature, data_.low[i]);
    } else {
      w.AddFloatList(low_[i].feature, data_.low[i], parquet::FixedOffsets(rows, low_[i].dim));
    }
  }
  w.AddFloat("timestamp", data_.timestamp);
  w.AddInt64("frame_index", data_.frame_index);
  w.AddInt64("episode_index", data_.episode_index);
  w.AddInt64("index", data_.index);
  w.AddInt64("task_index", data_.task_index);
  const std::string path = FileName(out_ + "/data", data_at_.chunk, data_at_.file, "parquet");
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return common::Internal("mkdir " + path + ": " + ec.message());
  EMBODY_RETURN_IF_ERROR(w.WriteFile(path));
  ++data_files_;
  data_ = DataFile{};
  data_.low.resize(low_.size());
  return common::Status::Ok();
}

common::Status Exporter::FinishVideos() {
  for (auto& enc : encoders_) {
    if (enc) EMBODY_RETURN_IF_ERROR(enc->Finish());
  }
  return common::Status::Ok();
}

common::Status Exporter::Run(LerobotExportResult* result) {
  ImportProgress progress;
  progress.demos_total = ds_.episodes();
  for (uint64_t e = 0; e < ds_.episodes(); ++e) {
    EMBODY_ASSIGN_OR_RETURN(ep, ds_.ReadEpisode(e));
    EMBODY_RETURN_IF_ERROR(AddEpisode(e, ep));
    progress.demos_done = e + 1;
    progress.frames += static_cast<uint64_t>(ep.frames());
    for (const Array& a : ep.arrays) progress.bytes += a.data.size();
    if (o_.progress) o_.progress(progress);
  }
  EMBODY_RETURN_IF_ERROR(FlushData());
  EMBODY_RETURN_IF_ERROR(FinishVideos());
  return WriteMeta(result);
}

}  // namespace lerobot_export_internal

namespace {

namespace fs = std::filesystem;
using lerobot_export_internal::Exporter;
using nlohmann::json;

// Removes the hidden directory unless the export got to its rename.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    if (!kept_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void Keep() { kept_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool kept_ = false;
};

}  // namespace

common::Result<LerobotExportResult> ExportLerobot(const std::string& dataset_dir,
                                                  const std::string& out_dir,
                                                  const LerobotExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.chunks_size < 1 || options.data_files_size_in_mb < 1 ||
      options.video_files_size_in_mb < 1) {
    return common::InvalidArgument("chunks_size and the file sizes must be positive");
  }
  if (options.fps < 0 || options.fps > 1000) {
    return common::InvalidArgument("fps must be in (0, 1000]", "fps");
  }
  std::error_code ec;
  const fs::path out = fs::absolute(fs::path(out_dir).lexically_normal(), ec);
  if (ec || out.filename().empty()) return common::InvalidArgument(out_dir + ": not a directory name");
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec)) {
      return common::Status(common::Code::kAlreadyExists,
                            out_dir + ": exists and is not an empty directory");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(ds, Dataset::Open(dataset_dir));
  double fps = options.fps;
  const json& source = ds->manifest().source;
  if (fps == 0 && source.contains("fps") && source["fps"].is_number()) {
    fps = source["fps"].get<double>();
  }
  if (!(fps > 0) || fps > 1000) {
    return common::InvalidArgument(dataset_dir +
                                       ": the dataset does not record its frame rate (its "
                                       "manifest's source has no fps); give one (--fps N)",
                                   "fps");
  }
  fs::create_directories(out.parent_path(), ec);
  if (ec) return common::Internal("mkdir " + out.parent_path().string() + ": " + ec.message());
  TempDir tmp(out.parent_path() / ("." + out.filename().string() + ".export-" +
                                   std::to_string(getpid())));
  fs::remove_all(tmp.path(), ec);
  fs::create_directory(tmp.path(), ec);
  if (ec) return common::Internal("mkdir " + tmp.path() + ": " + ec.message());

  LerobotExportResult result;
  result.fps = fps;
  Exporter exporter(*ds, tmp.path(), options, fps);
  EMBODY_RETURN_IF_ERROR(exporter.Plan(&result));
  EMBODY_RETURN_IF_ERROR(exporter.Run(&result));
  if (fs::exists(out, ec)) fs::remove(out, ec);  // an empty directory, checked above
  EMBODY_RETURN_IF_ERROR(common::Env::Default()->Rename(tmp.path(), out.string()));
  tmp.Keep();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace storage
