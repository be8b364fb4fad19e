// FFmpeg's objects owned by unique_ptr, and its error codes as text: one set for the decoder
// (video_import.cc), the encoder (video_encode.cc) and the test videos (testing/video_file.cc).
// For storage's FFmpeg sources only (embody_storage_video and its testing library link FFmpeg);
// the rest of storage does not include it.
#pragma once

#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

namespace storage::av {

inline std::string Error(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof(buf));
  return buf;
}

// A demuxer opened with avformat_open_input.
struct InputCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
// A muxer made with avformat_alloc_output_context2, its file opened with avio_open or not.
struct OutputCloser {
  void operator()(AVFormatContext* oc) const {
    if (oc->pb) avio_closep(&oc->pb);
    avformat_free_context(oc);
  }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

}  // namespace storage::av
