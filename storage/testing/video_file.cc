#include "storage/testing/video_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "common/hash.h"
#include "storage/av_handles.h"

namespace storage::testing {

namespace {

using common::SplitMix64;
using av::CodecCloser;
using av::FrameFree;
using av::OutputCloser;
using av::PacketFree;
using av::SwsFree;


// Sends one frame (null: flush) and writes every packet the encoder has ready.
common::Status Encode(AVFormatContext* oc, AVStream* st, AVCodecContext* c, AVFrame* frame,
                      AVPacket* pkt) {
  int r = avcodec_send_frame(c, frame);
  if (r < 0) return common::Internal("avcodec_send_frame: " + av::Error(r));
  for (;;) {
    r = avcodec_receive_packet(c, pkt);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return common::Status::Ok();
    if (r < 0) return common::Internal("avcodec_receive_packet: " + av::Error(r));
    av_packet_rescale_ts(pkt, c->time_base, st->time_base);
    pkt->stream_index = st->index;
    r = av_interleaved_write_frame(oc, pkt);  // takes the packet's reference
    if (r < 0) return common::Internal("av_interleaved_write_frame: " + av::Error(r));
  }
}

}  // namespace

void QuietVideoLogs() { av_log_set_level(AV_LOG_ERROR); }

bool HasVideoEncoder(const std::string& codec) {
  return avcodec_find_encoder_by_name(codec.c_str()) != nullptr;
}

common::Status WriteVideo(const std::string& path, const uint8_t* rgb, int64_t frames, int height,
                          int width, const VideoWriteOptions& options) {
  const AVCodec* enc = avcodec_find_encoder_by_name(options.codec.c_str());
  if (!enc) return common::NotFound("no encoder " + options.codec);
  if (height % 2 || width % 2) return common::InvalidArgument("height and width must be even");
  AVFormatContext* raw = nullptr;
  int r = avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str());
  if (r < 0) return common::Internal("avformat_alloc_output_context2: " + av::Error(r));
  std::unique_ptr<AVFormatContext, OutputCloser> oc(raw);
  AVStream* st = avformat_new_stream(oc.get(), nullptr);
  std::unique_ptr<AVCodecContext, CodecCloser> c(avcodec_alloc_context3(enc));
  if (!st || !c) return common::Internal("avformat_new_stream/avcodec_alloc_context3 failed");
  c->width = width;
  c->height = height;
  c->time_base = AVRational{1, options.fps};
  c->framerate = AVRational{options.fps, 1};
  c->pix_fmt = AV_PIX_FMT_YUV420P;
  c->gop_size = options.gop;
  if (options.codec == "mpeg4") {
    // Fixed quantiser 2 (near the best): the frames must come back close to what went in.
    c->flags |= AV_CODEC_FLAG_QSCALE;
    c->global_quality = FF_QP2LAMBDA * 2;
  } else if (options.codec == "libx264") {
    av_opt_set(c->priv_data, "preset", "veryfast", 0);
    av_opt_set(c->priv_data, "crf", "12", 0);
    av_opt_set(c->priv_data, "x264-params", "log=0", 0);  // errors only, not per-file stats
  }
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  r = avcodec_open2(c.get(), enc, nullptr);
  if (r < 0) return common::Internal("avcodec_open2 " + options.codec + ": " + av::Error(r));
  r = avcodec_parameters_from_context(st->codecpar, c.get());
  if (r < 0) return common::Internal("avcodec_parameters_from_context: " + av::Error(r));
  st->time_base = c->time_base;
  st->avg_frame_rate = c->framerate;
  r = avio_open(&oc->pb, path.c_str(), AVIO_FLAG_WRITE);
  if (r < 0) return common::Internal("avio_open " + path + ": " + av::Error(r));
  AVDictionary* opts = nullptr;
  if (options.faststart) av_dict_set(&opts, "movflags", "faststart", 0);
  r = avformat_write_header(oc.get(), &opts);
  av_dict_free(&opts);
  if (r < 0) return common::Internal("avformat_write_header: " + av::Error(r));

  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketFree> pkt(av_packet_alloc());
  frame->format = c->pix_fmt;
  frame->width = width;
  frame->height = height;
  r = av_frame_get_buffer(frame.get(), 0);
  if (r < 0) return common::Internal("av_frame_get_buffer: " + av::Error(r));
  std::unique_ptr<SwsContext, SwsFree> sws(sws_getContext(width, height, AV_PIX_FMT_RGB24, width,
                                                          height, AV_PIX_FMT_YUV420P, SWS_BILINEAR,
                                                          nullptr, nullptr, nullptr));
  if (!sws) return common::Internal("sws_getContext failed");
  const size_t frame_bytes = static_cast<size_t>(width) * height * 3;
  for (int64_t i = 0; i < frames; ++i) {
    r = av_frame_make_writable(frame.get());
    if (r < 0) return common::Internal("av_frame_make_writable: " + av::Error(r));
    const uint8_t* src[1] = {rgb + i * frame_bytes};
    const int src_stride[1] = {width * 3};
    sws_scale(sws.get(), src, src_stride, 0, height, frame->data, frame->linesize);
    frame->pts = i;
    if (options.codec == "mpeg4") frame->quality = c->global_quality;
    EMBODY_RETURN_IF_ERROR(Encode(oc.get(), st, c.get(), frame.get(), pkt.get()));
  }
  EMBODY_RETURN_IF_ERROR(Encode(oc.get(), st, c.get(), nullptr, pkt.get()));
  r = av_write_trailer(oc.get());
  if (r < 0) return common::Internal("av_write_trailer: " + av::Error(r));
  return common::Status::Ok();
}

std::vector<uint8_t> BlockFrames(uint64_t seed, int64_t frames, int height, int width) {
  std::vector<uint8_t> out(static_cast<size_t>(frames) * height * width * 3);
  uint64_t base = SplitMix64(seed) % 997;
  for (int64_t f = 0; f < frames; ++f) {
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        uint8_t* p = out.data() + ((f * height + y) * width + x) * 3;
        for (int ch = 0; ch < 3; ++ch) {
          // Consecutive frames differ by 29 levels per channel, so a frame out of place fails
          // any tolerance that lossy coding passes.
          uint64_t v =
              base + static_cast<uint64_t>(f) * 29 + (x / 16) * 53 + (y / 16) * 71 + ch * 37;
          p[ch] = static_cast<uint8_t>(24 + v % 208);
        }
      }
    }
  }
  return out;
}

FrameDiff CompareBlockFrames(const uint8_t* a, const uint8_t* b, int64_t frames, int height,
                             int width) {
  FrameDiff d;
  const size_t n = static_cast<size_t>(frames) * height * width * 3;
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<uint64_t>(std::abs(int{a[i]} - int{b[i]}));
  d.mean = n ? static_cast<double>(sum) / static_cast<double>(n) : 0;
  for (int64_t f = 0; f < frames; ++f) {
    for (int y = 8; y < height; y += 16) {
      for (int x = 8; x < width; x += 16) {
        size_t at = static_cast<size_t>(((f * height + y) * width + x) * 3);
        for (int ch = 0; ch < 3; ++ch) {
          d.max_block_centre =
              std::max(d.max_block_centre, std::abs(int{a[at + ch]} - int{b[at + ch]}));
        }
      }
    }
  }
  return d;
}

common::Result<std::vector<Episode>> WriteVideoEpisodes(const std::string& dir,
                                                        const VideoEpisodesSpec& spec) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const std::string& cam : spec.cameras) fs::create_directories(dir + "/videos/" + cam, ec);
  if (ec) return common::Internal("mkdir " + dir + ": " + ec.message());
  std::ofstream jsonl(dir + "/episodes.jsonl");
  std::vector<Episode> out;
  for (size_t e = 0; e < spec.lengths.size(); ++e) {
    const int64_t len = spec.lengths[e];
    char name[32];
    std::snprintf(name, sizeof(name), "episode_%06zu", e);
    Episode ep;
    auto low_dim = [&](const std::string& key, int dim, uint64_t salt, nlohmann::json& rows) {
      Array a;
      a.spec = {key, DType::kF32, {dim}};
      a.frames = len;
      a.data.resize(static_cast<size_t>(len) * dim * sizeof(float));
      float* v = reinterpret_cast<float*>(a.data.data());
      rows = nlohmann::json::array();
      for (int64_t t = 0; t < len; ++t) {
        nlohmann::json row = nlohmann::json::array();
        for (int i = 0; i < dim; ++i) {
          uint64_t r = SplitMix64(spec.seed * 1000003 + e * 7919 + salt * 104729 + t * 131 + i);
          // Multiples of 2^-20 in [-2, 2): exact in f32 and in the JSON text.
          float x = static_cast<float>(static_cast<double>(r >> 42) * 0x1.0p-20 - 2.0);
          v[t * dim + i] = x;
          row.push_back(x);
        }
        rows.push_back(std::move(row));
      }
      ep.arrays.push_back(std::move(a));
    };
    nlohmann::json line = {{"episode_index", e}, {"length", len}, {"tasks", {spec.task}}};
    low_dim("actions", spec.action_dim, 1, line["action"]);
    if (spec.state_dim > 0) low_dim("obs/state", spec.state_dim, 2, line["observation.state"]);
    for (size_t c = 0; c < spec.cameras.size(); ++c) {
      Array a;
      a.spec = {"obs/" + spec.cameras[c], DType::kU8, {spec.height, spec.width, 3}};
      a.frames = len;
      a.data = BlockFrames(spec.seed * 7777 + e * 31 + c, len, spec.height, spec.width);
      std::string path = dir + "/videos/" + spec.cameras[c] + "/" + name + ".mp4";
      EMBODY_RETURN_IF_ERROR(
          WriteVideo(path, a.data.data(), len, spec.height, spec.width, spec.video));
      ep.arrays.push_back(std::move(a));
    }
    std::sort(ep.arrays.begin(), ep.arrays.end(),
              [](const Array& x, const Array& y) { return x.spec.name < y.spec.name; });
    ep.attributes.emplace_back(kAttrDemoName, name);
    ep.attributes.emplace_back(kAttrSourceFile, dir);
    ep.attributes.emplace_back(kAttrLanguage, spec.task);
    jsonl << line.dump() << "\n";
    out.push_back(std::move(ep));
  }
  jsonl.close();
  if (!jsonl) return common::Internal("writing " + dir + "/episodes.jsonl failed");
  return out;
}

}  // namespace storage::testing
