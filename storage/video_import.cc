#include "storage/video_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include "storage/av_handles.h"

namespace storage {

// One open file: demuxer, decoder, the scaler to RGB and an aligned RGB buffer (swscale's fast
// paths want aligned rows; the caller's buffer is packed).
struct VideoFrameReader::State {
  std::string path;
  VideoDecodeOptions options;
  std::unique_ptr<AVFormatContext, av::InputCloser> format;
  std::unique_ptr<AVCodecContext, av::CodecCloser> codec;
  std::unique_ptr<AVFrame, av::FrameFree> frame;
  std::unique_ptr<AVPacket, av::PacketFree> packet;
  SwsContext* sws = nullptr;
  // What sws was last set up for, so colour details are set once per change.
  int sws_w = 0, sws_h = 0, sws_format = -1, sws_colorspace = -1, sws_range = -1;
  uint8_t* rgb[4] = {};
  int rgb_linesize[4] = {};
  int stream = -1;
  int out_w = 0, out_h = 0;
  bool eof_sent = false;
  int64_t last_index = -1;  // the frame ReadFrame returned last; -1 before any

  ~State() {
    sws_freeContext(sws);
    av_freep(&rgb[0]);
  }

  common::Status Fail(const std::string& msg) const {
    return common::InvalidArgument(path + ": " + msg);
  }

  common::Status Open() {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return Fail("no such video file");
    if (options.width < 0 || options.height < 0 || (options.width == 0) != (options.height == 0)) {
      return common::InvalidArgument("resize needs both width and height > 0, or neither",
                                     "resize");
    }
    AVFormatContext* f = nullptr;
    int r = avformat_open_input(&f, path.c_str(), nullptr, nullptr);
    if (r < 0) return Fail("not a readable video (" + av::Error(r) + ")");
    format.reset(f);
    r = avformat_find_stream_info(f, nullptr);
    if (r < 0) return Fail("cannot read stream information (" + av::Error(r) + ")");
    const AVCodec* decoder = nullptr;
    r = av_find_best_stream(f, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
    if (r == AVERROR_STREAM_NOT_FOUND) return Fail("no video stream");
    if (r == AVERROR_DECODER_NOT_FOUND || (r >= 0 && !decoder)) {
      const char* name = r >= 0 ? avcodec_get_name(f->streams[r]->codecpar->codec_id) : "?";
      return Fail(std::string("no decoder for its video codec (") + name + ")");
    }
    if (r < 0) return Fail("no usable video stream (" + av::Error(r) + ")");
    stream = r;
    const AVCodecParameters* par = f->streams[stream]->codecpar;
    if (par->width <= 0 || par->height <= 0) return Fail("video stream has no frame size");
    if (int64_t{par->width} * par->height > options.max_frame_pixels) {
      return Fail("frames of " + std::to_string(par->width) + "x" + std::to_string(par->height) +
                  " are more than the limit of " + std::to_string(options.max_frame_pixels) +
                  " pixels");
    }
    out_w = options.width ? options.width : par->width;
    out_h = options.height ? options.height : par->height;
    if (int64_t{out_w} * out_h > options.max_frame_pixels) {
      return Fail("resize target is more than the limit of " +
                  std::to_string(options.max_frame_pixels) + " pixels");
    }
    codec.reset(avcodec_alloc_context3(decoder));
    if (!codec) return common::Internal("avcodec_alloc_context3 failed");
    r = avcodec_parameters_to_context(codec.get(), par);
    if (r < 0) return Fail("bad codec parameters (" + av::Error(r) + ")");
    codec->thread_count = std::max(1, options.threads);
    r = avcodec_open2(codec.get(), decoder, nullptr);
    if (r < 0)
      return Fail(std::string("cannot open decoder ") + decoder->name + " (" + av::Error(r) + ")");
    frame.reset(av_frame_alloc());
    packet.reset(av_packet_alloc());
    if (!frame || !packet) return common::Internal("av_frame_alloc/av_packet_alloc failed");
    if (av_image_alloc(rgb, rgb_linesize, out_w, out_h, AV_PIX_FMT_RGB24, 32) < 0) {
      return common::Internal("av_image_alloc failed");
    }
    return common::Status::Ok();
  }

  // Decodes the next frame into `frame`; false at the end of the stream.
  common::Result<bool> NextFrame() {
    for (;;) {
      av_frame_unref(frame.get());
      int r = avcodec_receive_frame(codec.get(), frame.get());
      if (r == 0) {
        if (int64_t{frame->width} * frame->height > options.max_frame_pixels) {
          return Fail("a frame of " + std::to_string(frame->width) + "x" +
                      std::to_string(frame->height) + " is more than the pixel limit");
        }
        return true;
      }
      if (r == AVERROR_EOF) return false;
      if (r != AVERROR(EAGAIN)) return Fail("decoding failed (" + av::Error(r) + ")");
      if (eof_sent) return false;
      for (;;) {
        r = av_read_frame(format.get(), packet.get());
        if (r == AVERROR_EOF) {
          avcodec_send_packet(codec.get(), nullptr);  // drain the frames the decoder holds
          eof_sent = true;
          break;
        }
        if (r < 0) return Fail("reading failed (" + av::Error(r) + ")");
        if (packet->stream_index != stream) {
          av_packet_unref(packet.get());
          continue;
        }
        r = avcodec_send_packet(codec.get(), packet.get());
        av_packet_unref(packet.get());
        if (r < 0 && r != AVERROR(EAGAIN)) return Fail("decoding failed (" + av::Error(r) + ")");
        break;
      }
    }
  }

  // The decoded frame as packed RGB (out_h × out_w × 3) at `out`.
  common::Status Convert(uint8_t* out) {
    sws = sws_getCachedContext(sws, frame->width, frame->height,
                               static_cast<AVPixelFormat>(frame->format), out_w, out_h,
                               AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
    if (!sws) {
      return Fail(std::string("cannot convert frames of pixel format ") +
                  (av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame->format))
                       ? av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame->format))
                       : "?") +
                  " to RGB");
    }
    // The stream's own matrix and range (BT.709 for most HD cameras), not swscale's BT.601
    // default, or colours come out shifted.
    int colorspace = frame->colorspace, range = frame->color_range;
    if (frame->width != sws_w || frame->height != sws_h || frame->format != sws_format ||
        colorspace != sws_colorspace || range != sws_range) {
      int cs = SWS_CS_DEFAULT;
      if (colorspace == AVCOL_SPC_BT709) cs = SWS_CS_ITU709;
      if (colorspace == AVCOL_SPC_BT2020_NCL || colorspace == AVCOL_SPC_BT2020_CL)
        cs = SWS_CS_BT2020;
      if (colorspace == AVCOL_SPC_SMPTE240M) cs = SWS_CS_SMPTE240M;
      int* inv_table = nullptr;
      int* table = nullptr;
      int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
      if (sws_getColorspaceDetails(sws, &inv_table, &src_range, &table, &dst_range, &brightness,
                                   &contrast, &saturation) >= 0) {
        if (range == AVCOL_RANGE_JPEG) src_range = 1;
        if (range == AVCOL_RANGE_MPEG) src_range = 0;
        sws_setColorspaceDetails(sws, sws_getCoefficients(cs), src_range, table, dst_range,
                                 brightness, contrast, saturation);
      }
      sws_w = frame->width;
      sws_h = frame->height;
      sws_format = frame->format;
      sws_colorspace = colorspace;
      sws_range = range;
    }
    int h = sws_scale(sws, frame->data, frame->linesize, 0, frame->height, rgb, rgb_linesize);
    if (h != out_h) return Fail("scaling to RGB failed");
    const size_t row = static_cast<size_t>(out_w) * 3;
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(out + y * row, rgb[0] + static_cast<size_t>(y) * rgb_linesize[0], row);
    }
    return common::Status::Ok();
  }
};

common::Result<DecodedVideo> DecodeVideo(const std::string& path,
                                         const VideoDecodeOptions& options) {
  VideoFrameReader::State s;
  s.path = path;
  s.options = options;
  EMBODY_RETURN_IF_ERROR(s.Open());
  const AVStream* st = s.format->streams[s.stream];
  DecodedVideo v;
  v.height = s.out_h;
  v.width = s.out_w;
  v.codec = s.codec->codec->name;
  AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
  v.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  const uint64_t frame_bytes = static_cast<uint64_t>(v.width) * v.height * 3;
  // The container's frame count, when it has one, sizes the buffer once (bounded by the limits).
  if (st->nb_frames > 0 && st->nb_frames <= options.max_frames &&
      static_cast<uint64_t>(st->nb_frames) * frame_bytes <= options.max_bytes) {
    v.rgb.reserve(static_cast<size_t>(st->nb_frames * frame_bytes));
  }
  for (;;) {
    EMBODY_ASSIGN_OR_RETURN(more, s.NextFrame());
    if (!more) break;
    if (v.frames >= options.max_frames) {
      return s.Fail("more than " + std::to_string(options.max_frames) + " frames");
    }
    if ((static_cast<uint64_t>(v.frames) + 1) * frame_bytes > options.max_bytes) {
      return s.Fail("decoded frames exceed the limit of " + std::to_string(options.max_bytes) +
                    " bytes");
    }
    v.rgb.resize(static_cast<size_t>((v.frames + 1) * frame_bytes));
    EMBODY_RETURN_IF_ERROR(s.Convert(v.rgb.data() + v.frames * frame_bytes));
    ++v.frames;
  }
  if (v.frames == 0) return s.Fail("no frames could be decoded");
  // A file cut short after its index (moov first) decodes fewer frames than it lists.
  if (st->nb_frames > v.frames) {
    return s.Fail("the container lists " + std::to_string(st->nb_frames) + " frames but only " +
                  std::to_string(v.frames) + " decode (truncated or damaged)");
  }
  return v;
}

VideoFrameReader::VideoFrameReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
VideoFrameReader::~VideoFrameReader() = default;

common::Result<std::unique_ptr<VideoFrameReader>> VideoFrameReader::Open(
    const std::string& path, const VideoDecodeOptions& options) {
  auto s = std::make_unique<State>();
  s->path = path;
  s->options = options;
  EMBODY_RETURN_IF_ERROR(s->Open());
  return std::unique_ptr<VideoFrameReader>(new VideoFrameReader(std::move(s)));
}

int VideoFrameReader::height() const { return state_->out_h; }
int VideoFrameReader::width() const { return state_->out_w; }
double VideoFrameReader::fps() const {
  const AVStream* st = state_->format->streams[state_->stream];
  AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
  return rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
}

common::Status VideoFrameReader::ReadFrame(int64_t index, uint8_t* out) {
  State& s = *state_;
  if (index < 0 || index >= s.options.max_frames) {
    return s.Fail("frame " + std::to_string(index) + " is out of range");
  }
  const AVStream* st = s.format->streams[s.stream];
  AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
  if (rate.num <= 0 || rate.den <= 0) return s.Fail("no frame rate, cannot find frames by index");
  const AVRational frame_duration = av_inv_q(rate);
  const int64_t start = st->start_time == AV_NOPTS_VALUE ? 0 : st->start_time;
  const int64_t target = start + av_rescale_q(index, frame_duration, st->time_base);
  const int64_t half = std::max<int64_t>(1, av_rescale_q(1, frame_duration, st->time_base) / 2);
  // Reading on from the previous frame needs no seek; anything else seeks to the key frame at
  // or before the target and decodes forward.
  if (!(index == s.last_index + 1)) {
    int r = av_seek_frame(s.format.get(), s.stream, target, AVSEEK_FLAG_BACKWARD);
    if (r < 0) return s.Fail("seeking to frame " + std::to_string(index) + ": " + av::Error(r));
    avcodec_flush_buffers(s.codec.get());
    s.eof_sent = false;
  }
  s.last_index = -1;  // unknown until the frame is found
  for (;;) {
    EMBODY_ASSIGN_OR_RETURN(more, s.NextFrame());
    if (!more) return s.Fail("no frame " + std::to_string(index) + " (the video ends before)");
    int64_t pts = s.frame->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE) return s.Fail("a frame without a timestamp");
    if (pts + half <= target) continue;  // before the target: decoded only as a reference
    if (pts - half > target) {
      return s.Fail("no frame at the timestamp of frame " + std::to_string(index) +
                    " (variable frame rate?)");
    }
    EMBODY_RETURN_IF_ERROR(s.Convert(out));
    s.last_index = index;
    return common::Status::Ok();
  }
}

}  // namespace storage
