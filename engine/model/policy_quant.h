// Post-training quantisation of a trained policy to FP8 (the paper's PTQ for rollout and
// inference; docs/fp8.md "Post-training quantisation"): Linear weights become E4M3 codes in
// 128 x 128 blocks with one fp32 scale each (engine/fp8/block_quant.h), the fused qkv weight as
// three (C, C) slices so q, k and v never share a scale.
//
// Which layers: by default the blocks' four Linear weights (qkv, proj, fc1, fc2), which hold
// 90% of the reference policy's parameters and nearly all of its matrix-product time. Embedding tables
// and norms are never quantised (lookups and per-channel gains, no product to speed up); biases
// neither. The input embeddings' Linears (patch, state, action, time) and the action head stay
// fp32 unless asked: they are small, sit at the model's edges where an error is not averaged by
// later layers, and the head writes the velocity directly. policy_quant_test measures what
// quantising them too costs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/fp8/block_quant.h"
#include "engine/model/policy_transformer.h"

namespace engine {

struct PtqOptions {
  fp8::Format format = fp8::Format::kE4M3;
  bool embeddings = false;   // also the patch, state, action and time Linears
  bool action_head = false;  // also the action head
};

struct QuantizedPolicy {
  // Weight name → its FP8 row slices, as PolicyTransformer::SetFp8Weights takes them.
  std::map<std::string, std::vector<fp8::Fp8Matrix>> weights;
  fp8::Fp8Stats stats;       // over every quantised weight
  size_t fp32_bytes = 0;     // of the quantised tensors, as fp32
  size_t fp8_bytes = 0;      // the same tensors as codes + scales
};

// Quantises `model`'s weights (model is not changed). Names of the quantised tensors in
// QuantizedPolicy::weights, in layout order.
common::Result<QuantizedPolicy> QuantizePolicy(const PolicyTransformer& model,
                                               const PtqOptions& options);

// The names QuantizePolicy quantises for `options`, in layout order.
std::vector<std::string> QuantizedWeightNames(const PolicyConfig& config,
                                              const PtqOptions& options);

}  // namespace engine
