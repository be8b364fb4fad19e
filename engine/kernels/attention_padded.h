// Padded attention: the baseline that packing replaces, and a second opinion in tests. A batch of
// B sequences, each padded to Tpad tokens; a key padding mask hides the padding keys (and,
// optionally, later keys: causal). Per (batch, head) it materialises the full (Tpad, Tpad) score
// matrix and computes every row, padding queries included, as a padded framework does; their
// outputs are well defined (they attend to the real keys) but meaningless.
//
// Layouts (row-major): q, k, v, out, dout, dq, dk, dv (B, Tpad, H, D); key_mask (B, Tpad),
// nonzero = real key; lse (B, H, Tpad).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/kernels/attention_workspace.h"

namespace engine::kernels {

struct PaddedShape {
  int B = 0;
  int Tpad = 0;
  int H = 0;
  int D = 0;
  bool causal = false;
};

// Every sequence needs at least one real key, and with causal its first key must be real (else
// a query sees no key and its softmax is undefined): InvalidArgument otherwise.
common::Status AttentionPaddedForward(float* out, float* lse, const float* q, const float* k,
                                      const float* v, const uint8_t* key_mask,
                                      const PaddedShape& shape, AttentionWorkspace* ws);

// Accumulates (+=) into dq, dk, dv.
common::Status AttentionPaddedBackward(float* dq, float* dk, float* dv, const float* dout,
                                       const float* q, const float* k, const float* v,
                                       const float* out, const float* lse, const uint8_t* key_mask,
                                       const PaddedShape& shape, AttentionWorkspace* ws);

}  // namespace engine::kernels
