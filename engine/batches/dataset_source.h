// A dataset directory (storage/, written by embody-data) as policy samples: which keys feed
// which modality of the policy transformer, each sample's token count (computed at open from
// the shard indexes, for packing without reading data), and the decoding of one dataset sample
// into a PolicySample (engine/model/packed_batch.h).
//
// Mapping (options from api::DataOptions; docs/engine.md, "Training on a dataset"):
//   cameras   each camera key (u8, (H, W, C), C in {1, 3, 4}) is resized by area averaging to
//             S × S (S = image_size, a multiple of 8; the aspect ratio is not kept), scaled to
//             [0, 1], grey replicated to RGB, alpha dropped, and cut into (S/8)² patches of
//             8×8×3 = kPatchDim floats, row-major, HWC inside a patch: what reach_samples renders.
//   state     the proprio keys at frame t, concatenated in the order given, each element
//             normalised with the manifest's mean/std for it, cut into ⌈width/kStateDim⌉
//             state tokens, the last zero-padded; wider than api::kMaxStateTokens tokens is an
//             error naming the keys (api/dataset_fit.h holds these rules, shared with the
//             server's check at submit).
//   actions   rows t .. t+H-1 of "actions" (H = the model's action_horizon), normalised per
//             dimension with the manifest's mean/std; past the episode end the last action is
//             repeated (the arm holds still). The dataset's action_dim must equal the model's.
//   language  the episode's language_instruction attribute, else the job's data.language: one
//             token per whitespace-separated word (at most the manifest's max_language_tokens),
//             id = FNV-1a-64(lower-cased word) mod vocab. A hash, not a trained tokenizer: equal
//             words share an id, different words rarely collide in a vocabulary of thousands.
// One observation frame per sample (the frame t). Tokens per sample:
//   language + cameras·(S/8)² + state tokens + H.
// When the dataset's own token mapping describes the same tokens (its patch size cuts every
// camera into (S/8)² patches at the stored size, every image key is a camera, one history
// frame, as many proprio tokens, H actions), its index counts are checked to agree with these;
// otherwise they count different tokens and these are used in their place.
//
// Statistics that are missing or not finite, and standard deviations below 1e-6, normalise as
// mean 0 / std 1 (a constant dimension stays constant instead of being blown up).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/model/packed_batch.h"
#include "engine/model/policy_transformer.h"
#include "storage/dataset_reader.h"

namespace engine {

class DatasetSource {
 public:
  // Opens the dataset and resolves the mapping; every refusal names the dataset, and, for a
  // sample too long for the model, its episode.
  static common::Result<std::unique_ptr<DatasetSource>> Open(const std::string& dir,
                                                             const api::DataOptions& data,
                                                             const PolicyConfig& model,
                                                             int tokens_per_row);

  const storage::Dataset& dataset() const { return *dataset_; }
  // Packed length of every dataset sample (action tokens included).
  const std::vector<int32_t>& sample_tokens() const { return tokens_; }
  // Identity of the dataset's content: a hash of the shards' index checksums and counts.
  uint64_t fingerprint() const { return fingerprint_; }
  const std::vector<std::string>& camera_keys() const { return camera_names_; }
  const std::vector<std::string>& proprio_keys() const { return proprio_names_; }
  // State tokens per frame: ⌈state width / kStateDim⌉, at least 1.
  int state_tokens() const { return state_tokens_; }
  // True when the shard indexes' token counts were checked against ours (see above).
  bool index_counts_checked() const { return index_counts_checked_; }

  // Dataset sample `sample` into *out (buffers reused), flow noise and time from sample_seed.
  // Read errors (checksum mismatch, I/O) name the shard file and the episode.
  common::Status MakeSample(uint64_t sample, uint64_t sample_seed, PolicySample* out) const;

 private:
  struct Lowdim {                       // one proprio key's place in the state tokens
    size_t key;                         // schema index
    int offset;                         // first state element
    std::vector<double> mean, inv_std;  // per element
  };
  DatasetSource() = default;
  common::Status Resolve(const api::DataOptions& data, const PolicyConfig& model,
                         int tokens_per_row);

  std::string dir_;
  std::unique_ptr<storage::Dataset> dataset_;
  int action_dim_ = 0, horizon_ = 0, image_size_ = 32, vocab_ = 0;
  std::vector<size_t> cameras_;  // schema indices
  std::vector<std::string> camera_names_, proprio_names_;
  std::vector<Lowdim> proprio_;
  size_t action_key_ = 0;
  std::vector<double> action_mean_, action_inv_std_;
  std::vector<std::vector<int32_t>> language_;  // per episode
  std::vector<int32_t> tokens_;
  uint64_t fingerprint_ = 0;
  bool index_counts_checked_ = false;
  int state_tokens_ = 1;
};

// Language token ids of `text` as above (exposed for tests).
std::vector<int32_t> HashLanguage(const std::string& text, int max_tokens, int vocab);

// Area-averaging resize of one u8 (h, w, c) image to s × s RGB floats in [0, 1], written as
// (s/8)² patches of kPatchDim (exposed for tests).
void ImageToPatches(const uint8_t* image, int h, int w, int c, int s, float* patches);

}  // namespace engine
