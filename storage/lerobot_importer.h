// Imports LeRobot-style episodes, whose cameras are stored as video, into a dataset directory.
// The frames are decoded here, once, into the shard format's u8 image keys (obs/<camera>,
// (H, W, 3)), so the training step reads pixels and never decodes video.
//
// Layout read (LeRobot v2 keeps low-dim data in parquet, for which Debian has no C++ reader
// without Arrow; this is the same content as JSON lines):
//
//   DIR/episodes.jsonl                        one JSON object per line, one line per episode
//   DIR/videos/<camera>/episode_NNNNNN.mp4    one video per camera per episode (6+ digits)
//
// A line: {"episode_index": 3, "length": 120, "tasks": ["put the cube in the bowl"],
//          "action": [[...], ...], "observation.state": [[...], ...]}
// "action" (required) and "observation.state" (optional, but then in every episode) hold
// `length` rows of numbers, each row as long as the first; they become the f32 keys "actions"
// and "obs/state". The language is "task" (a string) or "tasks" (strings, joined by "; "),
// unless the caller gives one. Every directory under videos/ is a camera and becomes the key
// obs/<camera> (a LeRobot name "observation.images.top" becomes obs/top). Episodes are written
// in episode_index order.
//
// Refused, naming the file and the episode, with nothing left behind (dataset_writer.h builds
// the output under a temporary name): a line that is not an object with the fields above, rows
// of the wrong count or width, a value that is not a finite f32, a repeated episode_index, an
// episode longer than max_episode_frames, a missing, truncated or undecodable video, a video
// whose frame count differs from the episode's length, a camera whose frame size changes
// between episodes (resize makes them one size). Bounds: the limits below and those of
// VideoDecodeOptions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "storage/dataset_writer.h"
#include "storage/hdf5_importer.h"
#include "storage/video_import.h"

namespace storage {

struct VideoEpisodesImportOptions {
  std::string language;  // overrides every episode's task when set
  int64_t max_episode_frames = 100000;
  int64_t max_episodes = 1000000;
  int max_low_dim = 4096;                       // elements per row of action / observation.state
  uint64_t max_line_bytes = uint64_t{1} << 26;  // one line of episodes.jsonl
  // Resize target and decoding bounds; max_frames is also capped by each episode's length.
  VideoDecodeOptions video;
  // Episodes decoded at once, ahead of the writer (one decoder thread each).
  int threads = 2;
  DatasetWriterOptions writer;
  std::function<void(const ImportProgress&)> progress;  // after each episode, caller's thread
  // The tar the directory was unpacked from (lerobot_archive.h): the manifest's source names it
  // as its path, with "archive": "tar", rather than the unpacked copy that is removed after.
  std::string source_archive;
};

common::Result<ImportResult> ImportVideoEpisodes(const std::string& dir, const std::string& out_dir,
                                                 const VideoEpisodesImportOptions& options);

}  // namespace storage
