// Test and benchmark helper: writes mp4 videos with libavcodec's encoders from known RGB frames,
// and whole LeRobot-style episode directories (episodes.jsonl + videos/<camera>/...mp4), so no
// binary fixture is checked in. Frames are flat 16×16 colour blocks (whole macroblocks, so lossy
// coding keeps them nearly flat) whose colours change every frame; the content is a
// deterministic function of (seed, frame, block).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"

namespace storage::testing {

struct VideoWriteOptions {
  std::string codec = "mpeg4";  // an encoder name: "mpeg4", "libx264", ...
  int fps = 10;
  int gop = 12;  // frames from one key frame to the next
  // Index (moov) before the data, as streaming-friendly files have; the muxer's default puts it
  // at the end.
  bool faststart = false;
};

// Libav* messages below errors are dropped from here on, process-wide (x264 prints a line per
// file it encodes; a benchmark encodes hundreds).
void QuietVideoLogs();

// Whether this libavcodec has the named encoder (H.264 needs libx264 linked in).
bool HasVideoEncoder(const std::string& codec);

// Encodes `frames` packed RGB frames (frames, height, width, 3) into an mp4 at `path`.
// height and width must be even (4:2:0 chroma).
common::Status WriteVideo(const std::string& path, const uint8_t* rgb, int64_t frames, int height,
                          int width, const VideoWriteOptions& options = {});

// (frames, height, width, 3) of flat 16×16 colour blocks.
std::vector<uint8_t> BlockFrames(uint64_t seed, int64_t frames, int height, int width);

struct VideoEpisodesSpec {
  std::vector<int> lengths = {12, 7, 20};  // frames per episode
  std::vector<std::string> cameras = {"top", "wrist"};
  int height = 48;
  int width = 64;
  int state_dim = 6;  // 0: no observation.state
  int action_dim = 7;
  std::string task = "put the cube in the bowl";
  VideoWriteOptions video;
  uint64_t seed = 1;
};

// Writes DIR/episodes.jsonl and DIR/videos/<camera>/episode_NNNNNN.mp4 (DIR is created if
// missing) and returns, per episode, what went in: actions and obs/state as f32, obs/<camera>
// as the RGB frames before encoding, keys in name order, attributes demo (episode_NNNNNN),
// source_file (DIR) and language_instruction (the task).
common::Result<std::vector<Episode>> WriteVideoEpisodes(const std::string& dir,
                                                        const VideoEpisodesSpec& spec);

// Mean absolute difference per byte, and the largest difference at the centre pixel of any
// 16×16 block, between two (frames, height, width, 3) buffers of the same size.
struct FrameDiff {
  double mean = 0;
  int max_block_centre = 0;
};
FrameDiff CompareBlockFrames(const uint8_t* a, const uint8_t* b, int64_t frames, int height,
                             int width);

}  // namespace storage::testing
