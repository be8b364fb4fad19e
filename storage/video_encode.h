// Encodes RGB u8 frames (frames, H, W, 3) into an mp4 with libavcodec, frames appended in any
// number of calls: how an export writes a camera's episodes back to back into one video file.
// The inverse of video_import.h. Pixels go out as yuv420p (H and W even), frame i at time i / fps.
//
// Codec "av1" takes the first AV1 encoder this libavcodec has, in the order libsvtav1,
// libaom-av1, librav1e (Debian's FFmpeg has all three), falling through to the next when one
// cannot open the stream (SVT-AV1 refuses frames smaller than 64 pixels on a side); any other
// codec is an encoder name ("mpeg4", "libx264"). Errors name the file and the encoder.
// Not thread-safe; separate encoders may run on separate threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace storage {

struct VideoEncodeOptions {
  std::string codec = "av1";
  double fps = 30;
  // Constant quality, on the encoder's CRF scale (0..63 for AV1; LeRobot's default is 30).
  int crf = 30;
  // Frames from one key frame to the next (LeRobot encodes with 2: cheap random access).
  int gop = 2;
  // Encoder threads; 0 lets the encoder choose.
  int threads = 0;
};

// The AV1 encoders this libavcodec has, in the order "av1" tries them.
std::vector<std::string> AvailableAv1Encoders();

class VideoEncoder {
 public:
  static common::Result<std::unique_ptr<VideoEncoder>> Open(const std::string& path, int height,
                                                            int width,
                                                            const VideoEncodeOptions& options);
  ~VideoEncoder();
  VideoEncoder(const VideoEncoder&) = delete;
  VideoEncoder& operator=(const VideoEncoder&) = delete;

  // Appends `frames` frames of height x width x 3 bytes each.
  common::Status Add(const uint8_t* rgb, int64_t frames);
  // Flushes the encoder and writes the index; the file is complete after this.
  common::Status Finish();

  int64_t frames() const;
  // Bytes written to the file so far (the muxer's position).
  int64_t bytes() const;
  const std::string& encoder() const;  // "libsvtav1", ...
  const std::string& path() const;

  struct State;

 private:
  explicit VideoEncoder(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace storage
