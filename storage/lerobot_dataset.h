// Reads LeRobot datasets as LeRobot writes them, codebase versions v2.0/v2.1 and v3.0, and
// imports them into a dataset directory. Not the older episodes.jsonl-with-values layout of
// lerobot_importer.h: ImportLerobot() passes a directory without meta/info.json on to it.
//
//   v2.x  meta/info.json, meta/episodes.jsonl ({"episode_index", "tasks", "length"} per line),
//         one parquet per episode at info.json's data_path ("data/chunk-{episode_chunk:03d}/
//         episode_{episode_index:06d}.parquet", episode_chunk = episode_index / chunks_size) and
//         one mp4 per camera per episode at video_path.
//   v3.0  meta/info.json, meta/episodes/chunk-NNN/file-NNN.parquet (per episode: tasks, length,
//         data/chunk_index, data/file_index, dataset_from_index, dataset_to_index and per camera
//         videos/<key>/{chunk_index, file_index, from_timestamp, to_timestamp}); data and video
//         files hold many episodes back to back.
//
// Mapping: "action" -> actions, "observation.state" -> obs/state (f32), every feature of dtype
// "video" -> obs/<name> (u8 (H, W, 3), decoded once here; "observation.images.top" -> obs/top),
// the episode's tasks (joined by "; ") -> its language instruction. Other features (rewards,
// environment state, ...) are not imported; the manifest's source lists them. Features of dtype
// "image" (PNG bytes inside the parquet) are refused as unsupported.
//
// Checked, refusing with an error that names the episode and the file: every file the layout
// names exists; info.json is an object with a known codebase_version, fps, features and path
// templates; in each episode's rows, episode_index is the episode, frame_index runs 0..n-1,
// index runs on by one (from dataset_from_index in v3.0), timestamps are frame_index / fps
// within 1/fps, n equals the episode's length, vectors are non-null, finite and of the
// feature's length; a camera's frames for the episode (v2.x: the whole file; v3.0: frames
// [from_timestamp, to_timestamp) of the file at the file's frame rate) number n within one
// frame; the video's frame rate is the dataset's. A video one frame short repeats its last
// frame and one frame long loses it, as LeRobot's own loader tolerates a frame of timing slack.
// Everything read is bounded by the options (and ReaderOptions, VideoDecodeOptions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/hdf5_importer.h"
#include "storage/lerobot_importer.h"

namespace storage {

struct LerobotCamera {
  std::string feature;  // "observation.images.top"
  std::string key;      // "obs/top"
};

// One camera's part of one episode: a whole file (v2.x, to < 0) or a time range of it.
struct LerobotVideoRange {
  std::string path;
  double from = 0;
  double to = -1;
};

struct LerobotEpisodeRef {
  int64_t index = 0;
  int64_t length = 0;
  std::string task;
  std::string data_path;
  int64_t from_index = -1;                // v3.0: the episode's first global `index`
  std::vector<LerobotVideoRange> videos;  // one per camera, in LerobotLayout::cameras order
};

struct LerobotLayout {
  std::string dir;
  std::string version;  // "v2.0", "v2.1", "v3.0"
  double fps = 0;
  int action_dim = 0;
  int state_dim = 0;  // 0: no observation.state
  std::vector<LerobotCamera> cameras;
  std::vector<LerobotEpisodeRef> episodes;  // in episode_index order
  std::vector<std::string> ignored_features;
};

// Reads the metadata and resolves every episode's files; reads no frames.
common::Result<LerobotLayout> ReadLerobotLayout(const std::string& dir,
                                                const VideoEpisodesImportOptions& options);

// One episode's low-dim rows, checked as described above.
struct LerobotFrames {
  int64_t length = 0;
  std::vector<float> action;  // (length, action_dim)
  std::vector<float> state;   // (length, state_dim), empty without observation.state
};

// The parquet files of a layout, each read whole once and kept while episodes in it are read
// (v3.0 files hold many). Safe to call from several threads.
class LerobotDataFiles {
 public:
  // Keeps at most `keep` decoded files.
  explicit LerobotDataFiles(size_t keep);
  ~LerobotDataFiles();
  common::Result<LerobotFrames> Read(const LerobotLayout& layout, const LerobotEpisodeRef& ep);

  struct Cache;

 private:
  std::unique_ptr<Cache> cache_;
};

// Imports a LeRobot dataset directory: v2.x or v3.0 by meta/info.json's codebase_version, or,
// without meta/info.json, the episodes.jsonl layout of ImportVideoEpisodes.
common::Result<ImportResult> ImportLerobot(const std::string& dir, const std::string& out_dir,
                                           const VideoEpisodesImportOptions& options);

}  // namespace storage
