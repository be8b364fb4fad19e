#include "engine/model/policy_quant.h"

namespace engine {

std::vector<std::string> QuantizedWeightNames(const PolicyConfig& config,
                                              const PtqOptions& options) {
  std::vector<std::string> names;
  if (options.embeddings) {
    for (const char* n : {"embed.patch.weight", "embed.state.weight", "embed.action.weight",
                          "embed.time.weight"}) {
      names.push_back(n);
    }
  }
  for (int l = 0; l < config.layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    for (const char* n : {"attn.qkv.weight", "attn.proj.weight", "mlp.fc1.weight",
                          "mlp.fc2.weight"}) {
      names.push_back(b + n);
    }
  }
  if (options.action_head) names.push_back("action_head.weight");
  return names;
}

common::Result<QuantizedPolicy> QuantizePolicy(const PolicyTransformer& model,
                                               const PtqOptions& options) {
  QuantizedPolicy out;
  bool first = true;
  for (const std::string& name : QuantizedWeightNames(model.config(), options)) {
    const ParamTensor* t = model.layout().Find(name);
    if (t == nullptr || t->shape.size() != 2) {
      return common::Internal("no 2-D tensor " + name + " in the policy's layout");
    }
    // The fused qkv weight (3C, C) is three (C, C) products: one slice each.
    const int parts = name.ends_with("attn.qkv.weight") ? 3 : 1;
    const int rows = t->shape[0] / parts, cols = t->shape[1];
    std::vector<fp8::Fp8Matrix>& slices = out.weights[name];
    slices.resize(parts);
    for (int p = 0; p < parts; ++p) {
      const float* w = model.params() + t->offset + static_cast<size_t>(p) * rows * cols;
      EMBODY_ASSIGN_OR_RETURN(stats, fp8::QuantizeWeights(w, rows, cols, options.format,
                                                          &slices[p]));
      if (first) {
        out.stats = stats;
        first = false;
      } else {
        out.stats.Merge(stats);
      }
      out.fp8_bytes += slices[p].Bytes();
    }
    out.fp32_bytes += t->size * sizeof(float);
  }
  return out;
}

}  // namespace engine
