// Decodes camera videos (mp4 and whatever else FFmpeg's libavformat opens, any codec its
// libavcodec decodes: H.264, MPEG-4 Part 2, AV1, ...) into RGB u8 frames (frames, H, W, 3),
// optionally resized, with libswscale. This is how video-backed episodes enter the shard format:
// frames are decoded once at import, so the training step never decodes video.
//
// Every error names the file: a missing file, one libavformat cannot open (a truncated mp4 has
// lost its index), one without a video stream or with a codec that has no decoder, and a
// decoding failure. Decoding is bounded: at most max_frames frames, at most max_frame_pixels
// pixels per source or output frame, at most max_bytes of RGB output. Nothing here keeps global
// state; separate decoders may run on separate threads.
//
// Not here: audio, and frames of varying size inside one file (every frame is scaled to the
// first frame's size, or to the resize target).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace storage {

struct VideoDecodeOptions {
  // Resize target; 0 and 0 keep the source size. Both or neither.
  int width = 0;
  int height = 0;
  int64_t max_frames = 100000;
  int64_t max_frame_pixels = int64_t{3840} * 2160;
  uint64_t max_bytes = uint64_t{4} << 30;
  // libavcodec's own decoding threads for one file (1: callers decode several files at once).
  int threads = 1;
};

struct DecodedVideo {
  int64_t frames = 0;
  int height = 0;
  int width = 0;
  std::vector<uint8_t> rgb;  // (frames, height, width, 3), row-major
  std::string codec;         // libavcodec's decoder name, e.g. "h264"
  double fps = 0;            // the stream's average frame rate; 0 when unknown
};

// Decodes every frame of `path`, in presentation order.
common::Result<DecodedVideo> DecodeVideo(const std::string& path,
                                         const VideoDecodeOptions& options = {});

// Random access to single frames of one open file, as a loader that keeps video to the training
// step must do: seek to the key frame at or before frame `index` and decode forward to it.
// Frame i is the frame whose timestamp is start + i / fps, so the file must have a constant
// frame rate (what camera recordings and LeRobot's encoder write). Reading index+1 right after
// index decodes one frame without seeking. Not thread-safe: one reader per thread.
class VideoFrameReader {
 public:
  static common::Result<std::unique_ptr<VideoFrameReader>> Open(
      const std::string& path, const VideoDecodeOptions& options = {});
  ~VideoFrameReader();
  VideoFrameReader(const VideoFrameReader&) = delete;
  VideoFrameReader& operator=(const VideoFrameReader&) = delete;

  // Output frame size (the resize target, or the source's).
  int height() const;
  int width() const;
  // The stream's average frame rate (what frame indices are counted in); 0 when unknown.
  double fps() const;
  // Writes frame `index` as height() × width() × 3 bytes to `out`.
  common::Status ReadFrame(int64_t index, uint8_t* out);

  struct State;

 private:
  explicit VideoFrameReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace storage
