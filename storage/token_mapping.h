// How an episode's frames turn into tokens, so a packer can plan rows from the index alone.
//
// One sample is one frame index t of an episode together with the action chunk that follows it
// (actions t .. t+action_horizon-1). Its token count under a TokenMapping is
//
//   language + Σ_{frames f of the sample} (Σ_{image keys} ⌈H/P⌉·⌈W/P⌉ + proprio) + action_horizon
//
// where the sample's frames are t-history_frames+1 .. t clipped at the episode start (so early
// samples of a history window are shorter), an image key is an obs/ key of u8 with frame shape
// (H,W,C), every other obs/ key is low-dimensional state and all of them together make
// `proprio_tokens_per_frame` tokens, and language is one token per whitespace-separated word of
// the episode's language instruction, at most max_language_tokens. Keys outside obs/ (actions,
// rewards, dones, states) are targets or bookkeeping and carry no input tokens.
//
// The mapping is chosen by the caller at import and recorded in the manifest; the counts are in
// each shard's index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"

namespace storage {

struct TokenMapping {
  int patch_size = 14;               // P: images become ⌈H/P⌉·⌈W/P⌉ patch tokens
  int proprio_tokens_per_frame = 1;  // all low-dim obs keys of a frame together
  int history_frames = 1;            // observation frames per sample, ending at t
  int action_horizon = 16;           // actions per sample, one token each
  int max_language_tokens = 64;

  common::Status Validate() const;
};

// True for keys that count as camera images (obs/, u8, frame shape (H,W,C)).
bool IsImageKey(const KeySpec& k);
// True for obs/ keys that are not images.
bool IsLowDimObsKey(const KeySpec& k);

int LanguageTokens(const std::string& text, const TokenMapping& m);

// Token count of every sample (frame) of an episode of `frames` frames with this schema.
std::vector<uint32_t> SampleTokenCounts(const Schema& schema, int64_t frames,
                                        const std::string& language, const TokenMapping& m);

}  // namespace storage
