// The import of a LeRobot v2.x / v3.0 dataset (lerobot_dataset.h): each episode's low-dim rows
// and camera frames are assembled on decoder threads, in episode order, and written as shards.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "storage/lerobot_dataset.h"
#include "storage/lerobot_dataset_internal.h"
#include "storage/lerobot_stats.h"
#include "storage/read_ahead.h"
#include "storage/video_import.h"

namespace storage {

namespace {

using lerobot_internal::EpisodeName;
using lerobot_internal::F32Array;
using lerobot_internal::PlainName;

namespace fs = std::filesystem;

common::Status CheckFps(double video_fps, double fps, const std::string& what) {
  if (video_fps > 0 && std::fabs(video_fps - fps) > 0.01 * fps) {
    return common::InvalidArgument(what + ": the video runs at " + std::to_string(video_fps) +
                                   " fps, info.json says " + std::to_string(fps));
  }
  return common::Status::Ok();
}

// `frames` decoded frames of `frame_bytes` each become exactly `n`: one short repeats the last,
// one long drops it (the caller has checked the difference is at most one).
void FitFrames(std::vector<uint8_t>& rgb, int64_t frames, int64_t n, size_t frame_bytes) {
  rgb.resize(static_cast<size_t>(std::max<int64_t>(frames, n)) * frame_bytes);
  for (int64_t f = frames; f < n; ++f) {
    std::memcpy(rgb.data() + f * frame_bytes, rgb.data() + (frames - 1) * frame_bytes, frame_bytes);
  }
  rgb.resize(static_cast<size_t>(n) * frame_bytes);
}

// One camera's frames of the episode, exactly `n` of them.
common::Result<Array> DecodeCamera(const LerobotLayout& layout, const LerobotVideoRange& range,
                                   const std::string& key, int64_t n,
                                   const VideoEpisodesImportOptions& options,
                                   const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(range.path, ec)) {
    return common::InvalidArgument(what + ": " + range.path + ": missing");
  }
  auto mismatch = [&](const std::string& frames) {
    return common::InvalidArgument(what + ": " + range.path + " has " + frames +
                                   " frames for the episode, its data has " + std::to_string(n) +
                                   " rows (more than one frame apart)");
  };
  VideoDecodeOptions vo = options.video;
  Array a;
  a.spec.dtype = DType::kU8;
  a.spec.name = key;
  a.frames = n;
  if (range.to < 0) {
    // The whole file is the episode; one frame more than the rows is still accepted.
    const bool capped = vo.max_frames > n;
    vo.max_frames = std::min(vo.max_frames, n + 1);
    auto v = DecodeVideo(range.path, vo);
    if (!v.ok()) {
      if (capped && v.status().message().find("more than " + std::to_string(n + 1) + " frames") !=
                        std::string::npos) {
        return mismatch("more than " + std::to_string(n + 1));
      }
      return common::InvalidArgument(what + ": " + v.status().message());
    }
    EMBODY_RETURN_IF_ERROR(CheckFps(v->fps, layout.fps, what + ": " + range.path));
    if (std::llabs(v->frames - n) > 1) return mismatch(std::to_string(v->frames));
    const size_t frame_bytes = static_cast<size_t>(v->height) * v->width * 3;
    FitFrames(v->rgb, v->frames, n, frame_bytes);
    a.spec.frame_shape = {v->height, v->width, 3};
    a.data = std::move(v->rgb);
    return a;
  }
  // A range of a file that holds several episodes: frame i of the file is at i / fps.
  const int64_t first = std::llround(range.from * layout.fps);
  const int64_t count = std::llround((range.to - range.from) * layout.fps);
  if (std::llabs(count - n) > 1) return mismatch(std::to_string(count));
  vo.max_frames = first + count + 1;
  auto reader = VideoFrameReader::Open(range.path, vo);
  if (!reader.ok()) return common::InvalidArgument(what + ": " + reader.status().message());
  EMBODY_RETURN_IF_ERROR(CheckFps((*reader)->fps(), layout.fps, what + ": " + range.path));
  const size_t frame_bytes = static_cast<size_t>((*reader)->height()) * (*reader)->width() * 3;
  const int64_t take = std::min(count, n);
  if (static_cast<uint64_t>(n) * frame_bytes > options.video.max_bytes) {
    return common::InvalidArgument(what + ": " + range.path +
                                   ": decoded frames exceed the limit of " +
                                   std::to_string(options.video.max_bytes) + " bytes");
  }
  a.data.resize(static_cast<size_t>(take) * frame_bytes);
  for (int64_t f = 0; f < take; ++f) {
    common::Status st = (*reader)->ReadFrame(first + f, a.data.data() + f * frame_bytes);
    if (!st.ok()) {
      return common::InvalidArgument(what + ": frames [" + std::to_string(first) + ", " +
                                     std::to_string(first + count) + ") at " +
                                     std::to_string(range.from) + " s: " + st.message());
    }
  }
  FitFrames(a.data, take, n, frame_bytes);
  a.spec.frame_shape = {(*reader)->height(), (*reader)->width(), 3};
  return a;
}

common::Result<Episode> BuildEpisode(const LerobotLayout& layout, const LerobotEpisodeRef& ref,
                                     LerobotDataFiles& files,
                                     const VideoEpisodesImportOptions& options) {
  EMBODY_ASSIGN_OR_RETURN(low, files.Read(layout, ref));
  const std::string what = layout.dir + " episode " + std::to_string(ref.index);
  Episode ep;
  ep.arrays.push_back(F32Array("actions", layout.action_dim, low.length, low.action));
  if (layout.state_dim > 0)
    ep.arrays.push_back(F32Array("obs/state", layout.state_dim, low.length, low.state));
  for (size_t c = 0; c < layout.cameras.size(); ++c) {
    EMBODY_ASSIGN_OR_RETURN(
        a, DecodeCamera(layout, ref.videos[c], layout.cameras[c].key, low.length, options, what));
    ep.arrays.push_back(std::move(a));
  }
  std::sort(ep.arrays.begin(), ep.arrays.end(),
            [](const Array& a, const Array& b) { return a.spec.name < b.spec.name; });
  ep.attributes.emplace_back(kAttrDemoName, EpisodeName(ref.index));
  ep.attributes.emplace_back(kAttrSourceFile, ref.data_path);
  const std::string& lang = options.language.empty() ? ref.task : options.language;
  if (!lang.empty()) ep.attributes.emplace_back(kAttrLanguage, lang);
  return ep;
}

}  // namespace

common::Result<ImportResult> ImportLerobot(const std::string& dir, const std::string& out_dir,
                                           const VideoEpisodesImportOptions& options) {
  auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return common::InvalidArgument(
        dir + (fs::is_regular_file(dir, ec)
                   ? ": a file, not a directory (a LeRobot dataset is a directory with "
                     "meta/info.json; a tar of one imports with --tar)"
                   : ": not a directory"));
  }
  if (!fs::exists(dir + "/meta/info.json", ec)) return ImportVideoEpisodes(dir, out_dir, options);
  if (options.threads < 1 || options.threads > 256) {
    return common::InvalidArgument("threads must be in [1, 256]", "threads");
  }
  EMBODY_ASSIGN_OR_RETURN(layout, ReadLerobotLayout(dir, options));
  // Every file must be there before hours go into decoding the others.
  for (const LerobotEpisodeRef& ep : layout.episodes) {
    const std::string what = layout.dir + " episode " + std::to_string(ep.index);
    if (!fs::is_regular_file(ep.data_path, ec)) {
      return common::InvalidArgument(what + ": missing data file " + ep.data_path);
    }
    for (const LerobotVideoRange& v : ep.videos) {
      if (!fs::is_regular_file(v.path, ec)) {
        return common::InvalidArgument(what + ": missing video " + v.path);
      }
    }
  }

  EMBODY_ASSIGN_OR_RETURN(writer, DatasetWriter::Create(out_dir, options.writer));
  LerobotDataFiles files(static_cast<size_t>(options.threads) + 2);
  // Declared after the writer, so it stops (joining its decoders) before the writer removes
  // its temporary directory on an error.
  ReadAhead<Episode> decoded(
      layout.episodes.size(),
      [&](uint64_t i) { return BuildEpisode(layout, layout.episodes[i], files, options); },
      {.threads = options.threads, .capacity = static_cast<size_t>(options.threads) + 1});
  ImportProgress progress;
  progress.demos_total = layout.episodes.size();
  for (size_t i = 0; i < layout.episodes.size(); ++i) {
    EMBODY_ASSIGN_OR_RETURN(ep, decoded.Next());
    if (!ep) return common::Internal("episode decoding stopped early");
    progress.demos_done = i + 1;
    progress.frames += static_cast<uint64_t>(ep->frames());
    for (const Array& a : ep->arrays) progress.bytes += a.data.size();
    EMBODY_RETURN_IF_ERROR(writer->Add(*ep, layout.dir + " episode " +
                                                std::to_string(layout.episodes[i].index) + " (" +
                                                layout.episodes[i].data_path + ")"));
    if (options.progress) options.progress(progress);
  }
  nlohmann::json source = {{"type", "lerobot"},
                           {"path", layout.dir},
                           {"codebase_version", layout.version},
                           {"fps", layout.fps}};
  for (const LerobotCamera& cam : layout.cameras) source["cameras"][cam.key] = cam.feature;
  if (!layout.ignored_features.empty()) source["ignored_features"] = layout.ignored_features;
  if (options.video.width > 0) source["resize"] = {options.video.height, options.video.width};
  if (!options.language.empty()) source["language_instruction"] = options.language;
  if (!options.source_archive.empty()) {
    source["path"] = options.source_archive;
    source["archive"] = "tar";
  }
  // LeRobot's own numbers against the frames just read: a warning in the manifest, never a
  // failure (lerobot_stats.h).
  auto recorded = ReadLerobotStats(layout.dir, layout.version);
  if (!recorded.ok()) {
    source["stats_check"] = {{"ok", false}, {"error", recorded.status().message()}};
  } else if (*recorded) {
    source["stats_check"] = CompareLerobotStats(**recorded, writer->stats());
  }
  ImportResult result;
  EMBODY_RETURN_IF_ERROR(FinishImport(*writer, std::move(source), start, &result));
  return result;
}

}  // namespace storage
