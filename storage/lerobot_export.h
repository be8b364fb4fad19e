// Writes a dataset directory (dataset_reader.h) as a LeRobot v3.0 dataset, so that data curated
// here goes back to the tools that read LeRobot's format. The inverse of lerobot_dataset.h's
// import:
//
//   actions                  -> action             float32 [n]     (f64 and i32 narrowed)
//   obs/state                -> observation.state  float32 [n]
//   obs/<cam>, u8 (H, W, 3)  -> observation.images.<cam>, dtype video: AV1 yuv420p mp4
//   obs/<x>, other vectors   -> observation.<x>    float32 [n] (scalars: a float32 column)
//   <other> vectors/scalars  -> <other>            float32, '/' written as '.'
//   language_instruction     -> the episode's task ("" when an episode has none)
//
// and what LeRobot adds per frame: timestamp (frame_index / fps, float32), frame_index,
// episode_index, index and task_index (int64). Keys that fit none of these (images that are not
// RGB, ranks above 1) are left out and listed in the result.
//
// The layout, as LeRobot's v3.0 writer makes it:
//   meta/info.json                          codebase_version "v3.0", fps, features, templates,
//                                           chunks_size, *_files_size_in_mb, totals, splits
//   meta/stats.json                         per feature min, max, mean, std, count (images per
//                                           channel in [0, 1], shape (3, 1, 1))
//   meta/tasks.parquet                      task_index, task (pandas metadata: task is the index)
//   meta/episodes/chunk-000/file-000.parquet
//                                           per episode: episode_index, tasks, length,
//                                           data/{chunk_index,file_index}, dataset_{from,to}_index,
//                                           videos/<key>/{chunk_index, file_index, from_timestamp,
//                                           to_timestamp}, meta/episodes/{chunk_index,file_index}
//   data/chunk-CCC/file-FFF.parquet         episodes back to back; a new file once one holds
//                                           data_files_size_in_mb of values
//   videos/<key>/chunk-CCC/file-FFF.mp4     each camera's episodes back to back, frame i at i/fps;
//                                           a new file once one reaches video_files_size_in_mb
// File indices run to chunks_size - 1, then the chunk index moves on. Parquet files come from
// parquet/writer.h (Snappy, v1 pages).
//
// Nothing half-written: everything goes into a hidden directory beside OUT_DIR, renamed to
// OUT_DIR at the end; an existing OUT_DIR must be an empty directory. Errors name the episode.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/hdf5_importer.h"

namespace storage {

struct LerobotExportOptions {
  // Frames per second; 0: the dataset's own (its manifest's source.fps, which LeRobot and video
  // imports record). A dataset without one needs it given.
  double fps = 0;
  std::string codec = "av1";  // video_encode.h: "av1" or an encoder name
  int crf = 30;
  int gop = 2;
  int64_t chunks_size = 1000;
  int64_t data_files_size_in_mb = 100;
  int64_t video_files_size_in_mb = 500;
  std::string robot_type;  // "": the source's robot_type, else "unknown"
  // After each episode, on the caller's thread (demos_* count episodes).
  std::function<void(const ImportProgress&)> progress;
};

struct LerobotExportResult {
  int64_t episodes = 0;
  int64_t frames = 0;
  int64_t tasks = 0;
  double fps = 0;
  std::vector<std::string> features;      // in info.json, cameras included
  std::vector<std::string> ignored_keys;  // dataset keys with no LeRobot feature
  std::string video_encoder;              // "" without cameras
  int64_t data_files = 0;
  int64_t video_files = 0;
  double seconds = 0;
};

common::Result<LerobotExportResult> ExportLerobot(const std::string& dataset_dir,
                                                  const std::string& out_dir,
                                                  const LerobotExportOptions& options);

}  // namespace storage
