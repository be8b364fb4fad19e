#include "engine/batches/dataset_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "common/hash.h"
#include "common/rng.h"
#include "engine/model/flow_matching.h"
#include "api/dataset_fit.h"
#include "storage/token_mapping.h"

namespace engine {

static_assert(api::kStateTokenValues == kStateDim, "the server and the engine agree on a state token");
namespace {

constexpr int kPatchSide = 8;
constexpr double kMinStd = 1e-6;

// Element i of a row of `dtype` as a double.
double ElementAt(storage::DType dtype, const uint8_t* row, int64_t i) {
  switch (dtype) {
    case storage::DType::kU8:
      return row[i];
    case storage::DType::kI32: {
      int32_t v;
      std::memcpy(&v, row + 4 * i, 4);
      return v;
    }
    case storage::DType::kF32: {
      float v;
      std::memcpy(&v, row + 4 * i, 4);
      return v;
    }
    case storage::DType::kF64: {
      double v;
      std::memcpy(&v, row + 8 * i, 8);
      return v;
    }
  }
  return 0.0;
}

// The manifest's normalisation of key `name`, element by element (statistics are kept per
// element of the last dimension).
void Normalisation(const storage::DatasetManifest& m, const storage::KeySpec& spec,
                   std::vector<double>* mean, std::vector<double>* inv_std) {
  const int64_t n = spec.FrameElements();
  mean->assign(static_cast<size_t>(n), 0.0);
  inv_std->assign(static_cast<size_t>(n), 1.0);
  const storage::KeyStats* ks = nullptr;
  for (const auto& k : m.stats.keys) {
    if (k.spec.name == spec.name) ks = &k;
  }
  if (ks == nullptr || ks->mean.empty() || ks->mean.size() != ks->std.size()) return;
  const size_t groups = ks->mean.size();
  for (int64_t i = 0; i < n; ++i) {
    const double mu = ks->mean[static_cast<size_t>(i) % groups];
    const double sd = ks->std[static_cast<size_t>(i) % groups];
    if (!std::isfinite(mu) || !std::isfinite(sd)) continue;
    (*mean)[i] = mu;
    (*inv_std)[i] = sd > kMinStd ? 1.0 / sd : 1.0;
  }
}

// A value the model cannot train on: the episode is unusable (the importer refuses NaN actions,
// but obs keys are stored as they come).
common::Status NotFinite(const storage::Dataset& ds, uint64_t episode, uint32_t frame,
                         const std::string& key, int64_t element) {
  return common::InvalidArgument(ds.DescribeEpisode(episode) + ": key " + key + " frame " +
                                 std::to_string(frame) + " element " + std::to_string(element) +
                                 " is NaN or Inf; the loader cannot use this episode");
}

}  // namespace

std::vector<int32_t> HashLanguage(const std::string& text, int max_tokens, int vocab) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size() && static_cast<int>(ids.size()) < max_tokens) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) break;
    uint64_t h = common::kFnv1a64Basis;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) {
      const unsigned char c =
          static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(text[i])));
      h = common::Fnv1a64Bytes(&c, 1, h);
      ++i;
    }
    ids.push_back(static_cast<int32_t>(h % static_cast<uint64_t>(vocab)));
  }
  return ids;
}

void ImageToPatches(const uint8_t* image, int h, int w, int c, int s, float* patches) {
  const int grid = s / kPatchSide;
  // Output pixel (y, x) averages the source area [y·h/s, (y+1)·h/s) × [x·w/s, (x+1)·w/s),
  // weighting partly covered source pixels by their coverage (exact area resampling).
  const double sy = static_cast<double>(h) / s, sx = static_cast<double>(w) / s;
  for (int y = 0; y < s; ++y) {
    const double y0 = y * sy, y1 = (y + 1) * sy;
    for (int x = 0; x < s; ++x) {
      const double x0 = x * sx, x1 = (x + 1) * sx;
      double acc[4] = {0, 0, 0, 0}, area = 0.0;
      for (int iy = static_cast<int>(y0); iy < h && iy < y1; ++iy) {
        const double wy = std::min<double>(iy + 1, y1) - std::max<double>(iy, y0);
        for (int ix = static_cast<int>(x0); ix < w && ix < x1; ++ix) {
          const double wgt = wy * (std::min<double>(ix + 1, x1) - std::max<double>(ix, x0));
          const uint8_t* px = image + (static_cast<size_t>(iy) * w + ix) * c;
          for (int ch = 0; ch < c && ch < 3; ++ch) acc[ch] += wgt * px[ch];
          area += wgt;
        }
      }
      float rgb[3];
      for (int ch = 0; ch < 3; ++ch) {
        const double v = c >= 3 ? acc[ch] : acc[0];  // grey: replicate
        rgb[ch] = static_cast<float>(area > 0 ? v / area / 255.0 : 0.0);
      }
      const int gy = y / kPatchSide, gx = x / kPatchSide;
      float* dst = patches + static_cast<size_t>(gy * grid + gx) * kPatchDim +
                   ((y % kPatchSide) * kPatchSide + (x % kPatchSide)) * 3;
      dst[0] = rgb[0];
      dst[1] = rgb[1];
      dst[2] = rgb[2];
    }
  }
}

common::Result<std::unique_ptr<DatasetSource>> DatasetSource::Open(const std::string& dir,
                                                                   const api::DataOptions& data,
                                                                   const PolicyConfig& model,
                                                                   int tokens_per_row) {
  std::unique_ptr<DatasetSource> src(new DatasetSource());
  src->dir_ = dir;
  EMBODY_ASSIGN_OR_RETURN(ds, storage::Dataset::Open(dir));
  src->dataset_ = std::move(ds);
  EMBODY_RETURN_IF_ERROR(src->Resolve(data, model, tokens_per_row));
  return src;
}

common::Status DatasetSource::Resolve(const api::DataOptions& data, const PolicyConfig& model,
                                      int tokens_per_row) {
  const storage::Dataset& ds = *dataset_;
  const storage::DatasetManifest& m = ds.manifest();
  const storage::Schema& schema = ds.schema();
  action_dim_ = model.action_dim;
  horizon_ = model.action_horizon;
  image_size_ = data.image_size;
  vocab_ = model.vocab;
  if (ds.samples() == 0) return common::InvalidArgument(dir_ + ": the dataset has no samples");
  if (image_size_ < kPatchSide || image_size_ % kPatchSide != 0) {
    return common::InvalidArgument("image_size must be a positive multiple of 8",
                                   "engine.data.image_size");
  }

  // Which keys feed which modality: the rules the server checks at submit (api/dataset_fit.h).
  std::vector<api::DatasetKeyShape> keys;
  for (const auto& k : schema) {
    keys.push_back({k.name, storage::DTypeName(k.dtype), k.frame_shape});
  }
  EMBODY_ASSIGN_OR_RETURN(fit, api::FitDataset(keys, data, model.action_dim, dir_));
  action_key_ = fit.actions;
  Normalisation(m, schema[action_key_], &action_mean_, &action_inv_std_);
  for (size_t index : fit.cameras) {
    cameras_.push_back(index);
    camera_names_.push_back(schema[index].name);
  }
  int width = 0;
  for (size_t index : fit.proprio) {
    Lowdim l;
    l.key = index;
    l.offset = width;
    Normalisation(m, schema[index], &l.mean, &l.inv_std);
    width += static_cast<int>(schema[index].FrameElements());
    proprio_.push_back(std::move(l));
    proprio_names_.push_back(schema[index].name);
  }
  state_tokens_ = fit.state_tokens;

  // Language and token counts, per episode, from the index alone.
  const int grid = image_size_ / kPatchSide;
  const int per_camera = grid * grid;
  const int max_words = m.mapping.max_language_tokens;
  // Does the dataset's own mapping count the same tokens? Then its index must agree with us.
  bool same_mapping = m.mapping.history_frames == 1 && m.mapping.proprio_tokens_per_frame == state_tokens_ &&
                      m.mapping.action_horizon == horizon_;
  int image_keys = 0;
  bool any_low_dim = false;
  for (const auto& k : schema) {
    if (storage::IsImageKey(k)) {
      ++image_keys;
      const int64_t p = m.mapping.patch_size;
      same_mapping =
          same_mapping &&
          ((k.frame_shape[0] + p - 1) / p) * ((k.frame_shape[1] + p - 1) / p) == per_camera;
    }
    any_low_dim = any_low_dim || storage::IsLowDimObsKey(k);
  }
  same_mapping = same_mapping && any_low_dim && image_keys == static_cast<int>(cameras_.size());
  index_counts_checked_ = same_mapping;

  language_.resize(ds.episodes());
  tokens_.resize(ds.samples());
  for (uint64_t e = 0; e < ds.episodes(); ++e) {
    std::string own;
    for (const auto& [name, value] : ds.EpisodeAttributes(e)) {
      if (name == storage::kAttrLanguage) own = value;
    }
    const std::string& text = own.empty() ? data.language : own;
    language_[e] = HashLanguage(text, max_words, vocab_);
    const int tokens = static_cast<int>(language_[e].size()) +
                       static_cast<int>(cameras_.size()) * per_camera + state_tokens_ + horizon_;
    if (tokens > tokens_per_row || tokens > model.max_positions) {
      return common::InvalidArgument(
          ds.DescribeEpisode(e) + ": a sample is " + std::to_string(tokens) + " tokens (" +
              std::to_string(language_[e].size()) + " language + " +
              std::to_string(cameras_.size()) + " cameras x " + std::to_string(per_camera) +
              " patches + " + std::to_string(state_tokens_) + " state + " +
              std::to_string(horizon_) +
              " actions), more than engine.data.tokens_per_row " + std::to_string(tokens_per_row) +
              " or the model's " + std::to_string(model.max_positions) + " positions",
          "engine.data.tokens_per_row");
    }
    const uint64_t first = ds.EpisodeFirstSample(e);
    const uint32_t frames = ds.EpisodeFrames(e);
    for (uint32_t t = 0; t < frames; ++t) {
      tokens_[first + t] = tokens;
      if (same_mapping && own == text &&
          ds.SampleTokens(first + t) != static_cast<uint32_t>(tokens)) {
        return common::InvalidArgument(
            ds.DescribeEpisode(e) + " frame " + std::to_string(t) + ": the shard index counts " +
            std::to_string(ds.SampleTokens(first + t)) +
            " tokens for this sample, the loader makes " + std::to_string(tokens));
      }
    }
  }

  uint64_t h = common::kFnv1a64Basis;
  for (const auto& s : m.shards) {
    const uint64_t words[4] = {s.index_crc, s.episodes, s.frames, s.bytes};
    h = common::Fnv1a64Bytes(words, sizeof(words), h);
  }
  fingerprint_ = h == 0 ? 1 : h;  // 0 means "the built-in stream" in checkpoints
  return common::Status::Ok();
}

common::Status DatasetSource::MakeSample(uint64_t sample, uint64_t sample_seed,
                                         PolicySample* out) const {
  const storage::Dataset& ds = *dataset_;
  const storage::Schema& schema = ds.schema();
  if (sample >= ds.samples()) {
    return common::Internal(dir_ + ": sample " + std::to_string(sample) + " out of range");
  }
  const auto [episode, t] = ds.Locate(sample);
  const uint32_t frames = ds.EpisodeFrames(episode);
  std::vector<uint8_t> row;

  out->language = language_[episode];
  out->frames = 1;
  out->cameras = static_cast<int>(cameras_.size());
  const int grid = image_size_ / kPatchSide;
  out->patches_per_camera = grid * grid;
  out->patches.resize(cameras_.size() * static_cast<size_t>(grid * grid) * kPatchDim);
  for (size_t c = 0; c < cameras_.size(); ++c) {
    const storage::KeySpec& k = schema[cameras_[c]];
    row.resize(static_cast<size_t>(k.FrameBytes()));
    EMBODY_RETURN_IF_ERROR(ds.ReadKeyRows(episode, cameras_[c], t, t + 1, row.data()));
    ImageToPatches(row.data(), static_cast<int>(k.frame_shape[0]),
                   static_cast<int>(k.frame_shape[1]), static_cast<int>(k.frame_shape[2]),
                   image_size_, out->patches.data() + c * grid * grid * kPatchDim);
  }

  out->state_tokens = state_tokens_;
  out->states.assign(static_cast<size_t>(state_tokens_) * kStateDim, 0.0f);
  for (const Lowdim& l : proprio_) {
    const storage::KeySpec& k = schema[l.key];
    row.resize(static_cast<size_t>(k.FrameBytes()));
    EMBODY_RETURN_IF_ERROR(ds.ReadKeyRows(episode, l.key, t, t + 1, row.data()));
    for (int64_t i = 0; i < k.FrameElements(); ++i) {
      const double v = ElementAt(k.dtype, row.data(), i);
      if (!std::isfinite(v)) return NotFinite(ds, episode, t, k.name, i);
      out->states[l.offset + i] = static_cast<float>((v - l.mean[i]) * l.inv_std[i]);
    }
  }

  const storage::KeySpec& ak = schema[action_key_];
  const uint32_t end = std::min<uint32_t>(frames, t + static_cast<uint32_t>(horizon_));
  const size_t fb = static_cast<size_t>(ak.FrameBytes());
  row.resize((end - t) * fb);
  EMBODY_RETURN_IF_ERROR(ds.ReadKeyRows(episode, action_key_, t, end, row.data()));
  out->actions.resize(static_cast<size_t>(horizon_) * action_dim_);
  for (int h = 0; h < horizon_; ++h) {
    const uint32_t have = std::min<uint32_t>(static_cast<uint32_t>(h), end - t - 1);
    const uint8_t* src = row.data() + have * fb;
    for (int j = 0; j < action_dim_; ++j) {
      const double a = ElementAt(ak.dtype, src, j);
      if (!std::isfinite(a)) return NotFinite(ds, episode, t + have, ak.name, j);
      out->actions[static_cast<size_t>(h) * action_dim_ + j] =
          static_cast<float>((a - action_mean_[j]) * action_inv_std_[j]);
    }
  }
  out->weight = 1.0f;
  common::Rng rng = common::Rng::ForKey(sample_seed, 0x64617461ULL);  // "data"
  DrawFlowNoise(rng, out);
  return common::Status::Ok();
}

}  // namespace engine
