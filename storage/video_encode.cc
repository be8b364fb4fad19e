#include "storage/video_encode.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "storage/av_handles.h"

namespace storage {

using av::CodecCloser;
using av::FrameFree;
using av::OutputCloser;
using av::PacketFree;
using av::SwsFree;

namespace {

constexpr const char* kAv1Encoders[] = {"libsvtav1", "libaom-av1", "librav1e"};


// Constant quality at `crf` on each encoder's own knobs, at a speed fit for hours of video.
void SetQuality(AVCodecContext* c, const std::string& name, int crf) {
  c->bit_rate = 0;  // quality, not a bit rate, decides
  if (name == "libsvtav1") {
    av_opt_set_int(c->priv_data, "crf", crf, 0);
    av_opt_set_int(c->priv_data, "preset", 8, 0);
  } else if (name == "libaom-av1") {
    av_opt_set_int(c->priv_data, "crf", crf, 0);
    // Good-quality mode at its fastest speed: the realtime mode skips updates of whole blocks
    // on sharp changes at this CRF.
    av_opt_set_int(c->priv_data, "cpu-used", 6, 0);
    av_opt_set_int(c->priv_data, "row-mt", 1, 0);
  } else if (name == "librav1e") {
    // rav1e's quantizer runs 0..255 and is coarser than a CRF of the same fraction.
    av_opt_set_int(c->priv_data, "qp", std::clamp(crf * 160 / 63, 0, 255), 0);
    av_opt_set_int(c->priv_data, "speed", 10, 0);
  } else if (name == "mpeg4") {
    c->flags |= AV_CODEC_FLAG_QSCALE;
    c->global_quality = FF_QP2LAMBDA * std::clamp(crf / 8, 1, 31);
  } else {
    av_opt_set_int(c->priv_data, "crf", crf, 0);  // libx264, libx265: ignored where absent
  }
}

}  // namespace

struct VideoEncoder::State {
  std::string path;
  std::string encoder;
  int height = 0, width = 0;
  int64_t frames = 0;
  bool finished = false;
  int64_t final_bytes = 0;
  std::unique_ptr<AVFormatContext, OutputCloser> oc;
  std::unique_ptr<AVCodecContext, CodecCloser> c;
  AVStream* stream = nullptr;
  std::unique_ptr<AVFrame, FrameFree> frame;
  std::unique_ptr<AVPacket, PacketFree> pkt;
  std::unique_ptr<SwsContext, SwsFree> sws;

  common::Status Error(const std::string& what, int r) const {
    return common::Internal(path + " (" + encoder + "): " + what + ": " + av::Error(r));
  }

  // Sends one frame (null: flush) and writes every packet the encoder has ready.
  common::Status Encode(AVFrame* f) {
    int r = avcodec_send_frame(c.get(), f);
    if (r < 0) return Error("avcodec_send_frame", r);
    for (;;) {
      r = avcodec_receive_packet(c.get(), pkt.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return common::Status::Ok();
      if (r < 0) return Error("avcodec_receive_packet", r);
      av_packet_rescale_ts(pkt.get(), c->time_base, stream->time_base);
      pkt->stream_index = stream->index;
      r = av_interleaved_write_frame(oc.get(), pkt.get());  // takes the packet's reference
      if (r < 0) return Error("av_interleaved_write_frame", r);
    }
  }
};

std::vector<std::string> AvailableAv1Encoders() {
  std::vector<std::string> out;
  for (const char* name : kAv1Encoders) {
    if (avcodec_find_encoder_by_name(name)) out.push_back(name);
  }
  return out;
}

VideoEncoder::VideoEncoder(std::unique_ptr<State> state) : state_(std::move(state)) {}
VideoEncoder::~VideoEncoder() = default;
int64_t VideoEncoder::frames() const { return state_->frames; }
int64_t VideoEncoder::bytes() const {
  return state_->oc && state_->oc->pb ? avio_tell(state_->oc->pb) : state_->final_bytes;
}
const std::string& VideoEncoder::encoder() const { return state_->encoder; }
const std::string& VideoEncoder::path() const { return state_->path; }

common::Result<std::unique_ptr<VideoEncoder>> VideoEncoder::Open(
    const std::string& path, int height, int width, const VideoEncodeOptions& options) {
  if (height < 2 || width < 2 || height % 2 || width % 2) {
    return common::InvalidArgument(path + ": frames of " + std::to_string(height) + "x" +
                                   std::to_string(width) +
                                   " cannot be encoded as yuv420p (height and width must be even)");
  }
  if (!(options.fps > 0) || options.fps > 1000) {
    return common::InvalidArgument(path + ": fps must be in (0, 1000]", "fps");
  }
  // SVT-AV1 prints a banner per stream on stderr through its own logger, not libav's; its
  // errors are kept. A level the user set is left alone.
  ::setenv("SVT_LOG", "1", /*overwrite=*/0);
  std::vector<std::string> candidates;
  if (options.codec == "av1") {
    candidates = AvailableAv1Encoders();
    if (candidates.empty()) {
      return common::FailedPrecondition(
          "this libavcodec has no AV1 encoder (libsvtav1, libaom-av1 or librav1e); install "
          "Debian's libavcodec59 with them, or choose another codec");
    }
  } else {
    if (!avcodec_find_encoder_by_name(options.codec.c_str())) {
      return common::InvalidArgument("this libavcodec has no encoder " + options.codec, "codec");
    }
    candidates = {options.codec};
  }
  auto s = std::make_unique<State>();
  s->path = path;
  s->height = height;
  s->width = width;
  const AVRational rate = av_d2q(options.fps, 100000);
  std::string refusals;
  for (const std::string& name : candidates) {
    if (name == "libsvtav1" && (height < 64 || width < 64)) {
      refusals += (refusals.empty() ? "" : "; ") + name + ": frames under 64 pixels a side";
      continue;  // known up front: spares SVT-AV1's error lines
    }
    const AVCodec* enc = avcodec_find_encoder_by_name(name.c_str());
    std::unique_ptr<AVCodecContext, CodecCloser> c(avcodec_alloc_context3(enc));
    if (!c) return common::Internal("avcodec_alloc_context3 failed");
    c->width = width;
    c->height = height;
    c->time_base = av_inv_q(rate);
    c->framerate = rate;
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->gop_size = std::max(1, options.gop);
    c->thread_count = options.threads;
    c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;  // mp4 keeps the sequence header in the sample entry
    SetQuality(c.get(), name, options.crf);
    const int r = avcodec_open2(c.get(), enc, nullptr);
    if (r < 0) {
      refusals += (refusals.empty() ? "" : "; ") + name + ": " + av::Error(r);
      continue;
    }
    s->c = std::move(c);
    s->encoder = name;
    break;
  }
  if (!s->c) {
    return common::InvalidArgument(path + ": no encoder accepts " + std::to_string(width) + "x" +
                                   std::to_string(height) + " frames (" + refusals + ")");
  }

  AVFormatContext* raw = nullptr;
  int r = avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str());
  if (r < 0) return s->Error("avformat_alloc_output_context2", r);
  s->oc.reset(raw);
  s->stream = avformat_new_stream(s->oc.get(), nullptr);
  if (!s->stream) return common::Internal("avformat_new_stream failed");
  r = avcodec_parameters_from_context(s->stream->codecpar, s->c.get());
  if (r < 0) return s->Error("avcodec_parameters_from_context", r);
  s->stream->time_base = s->c->time_base;
  s->stream->avg_frame_rate = s->c->framerate;
  r = avio_open(&s->oc->pb, path.c_str(), AVIO_FLAG_WRITE);
  if (r < 0) return s->Error("avio_open", r);
  r = avformat_write_header(s->oc.get(), nullptr);
  if (r < 0) return s->Error("avformat_write_header", r);

  s->frame.reset(av_frame_alloc());
  s->pkt.reset(av_packet_alloc());
  if (!s->frame || !s->pkt) return common::Internal("av_frame_alloc/av_packet_alloc failed");
  s->frame->format = AV_PIX_FMT_YUV420P;
  s->frame->width = width;
  s->frame->height = height;
  r = av_frame_get_buffer(s->frame.get(), 0);
  if (r < 0) return s->Error("av_frame_get_buffer", r);
  s->sws.reset(sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height,
                              AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr, nullptr, nullptr));
  if (!s->sws) return common::Internal("sws_getContext failed");
  return std::unique_ptr<VideoEncoder>(new VideoEncoder(std::move(s)));
}

common::Status VideoEncoder::Add(const uint8_t* rgb, int64_t frames) {
  State& s = *state_;
  if (s.finished) return common::FailedPrecondition(s.path + ": frames added after Finish");
  const size_t frame_bytes = static_cast<size_t>(s.width) * s.height * 3;
  for (int64_t i = 0; i < frames; ++i) {
    int r = av_frame_make_writable(s.frame.get());
    if (r < 0) return s.Error("av_frame_make_writable", r);
    const uint8_t* src[1] = {rgb + i * frame_bytes};
    const int src_stride[1] = {s.width * 3};
    sws_scale(s.sws.get(), src, src_stride, 0, s.height, s.frame->data, s.frame->linesize);
    s.frame->pts = s.frames;
    if (s.encoder == "mpeg4") s.frame->quality = s.c->global_quality;
    EMBODY_RETURN_IF_ERROR(s.Encode(s.frame.get()));
    ++s.frames;
  }
  return common::Status::Ok();
}

common::Status VideoEncoder::Finish() {
  State& s = *state_;
  if (s.finished) return common::Status::Ok();
  s.finished = true;
  EMBODY_RETURN_IF_ERROR(s.Encode(nullptr));
  const int r = av_write_trailer(s.oc.get());
  if (r < 0) return s.Error("av_write_trailer", r);
  s.final_bytes = avio_tell(s.oc->pb);
  avio_closep(&s.oc->pb);
  return common::Status::Ok();
}

}  // namespace storage
