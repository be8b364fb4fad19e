#include "storage/token_mapping.h"

#include <algorithm>
#include <cctype>

namespace storage {

common::Status TokenMapping::Validate() const {
  if (patch_size < 1 || patch_size > 4096) {
    return common::InvalidArgument("patch size must be in [1, 4096]", "patch_size");
  }
  if (proprio_tokens_per_frame < 0 || proprio_tokens_per_frame > 1024) {
    return common::InvalidArgument("proprio tokens per frame must be in [0, 1024]",
                                   "proprio_tokens_per_frame");
  }
  if (history_frames < 1 || history_frames > 1024) {
    return common::InvalidArgument("history frames must be in [1, 1024]", "history_frames");
  }
  if (action_horizon < 0 || action_horizon > 4096) {
    return common::InvalidArgument("action horizon must be in [0, 4096]", "action_horizon");
  }
  if (max_language_tokens < 0 || max_language_tokens > 65536) {
    return common::InvalidArgument("max language tokens must be in [0, 65536]",
                                   "max_language_tokens");
  }
  return common::Status::Ok();
}

static bool IsObs(const KeySpec& k) { return k.name.rfind("obs/", 0) == 0; }

bool IsImageKey(const KeySpec& k) {
  return IsObs(k) && k.dtype == DType::kU8 && k.frame_shape.size() == 3;
}

bool IsLowDimObsKey(const KeySpec& k) { return IsObs(k) && !IsImageKey(k); }

int LanguageTokens(const std::string& text, const TokenMapping& m) {
  int words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    bool space = std::isspace(c) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return std::min(words, m.max_language_tokens);
}

std::vector<uint32_t> SampleTokenCounts(const Schema& schema, int64_t frames,
                                        const std::string& language, const TokenMapping& m) {
  int64_t per_frame = 0;
  bool any_low_dim = false;
  for (const KeySpec& k : schema) {
    if (IsImageKey(k)) {
      int64_t p = m.patch_size;
      per_frame += ((k.frame_shape[0] + p - 1) / p) * ((k.frame_shape[1] + p - 1) / p);
    } else if (IsLowDimObsKey(k)) {
      any_low_dim = true;
    }
  }
  if (any_low_dim) per_frame += m.proprio_tokens_per_frame;
  int64_t fixed = LanguageTokens(language, m) + m.action_horizon;
  std::vector<uint32_t> out(static_cast<size_t>(std::max<int64_t>(frames, 0)));
  for (int64_t t = 0; t < frames; ++t) {
    int64_t obs_frames = std::min<int64_t>(t + 1, m.history_frames);
    int64_t n = fixed + obs_frames * per_frame;
    out[t] = static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX));
  }
  return out;
}

}  // namespace storage
