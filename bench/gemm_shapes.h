// The float32 GEMMs of one training step of the reference policy transformer (d_model 256, MLP
// 1024, fused QKV 768) over a packed batch of B tokens: for each Linear(C → OC), the forward
// product and the two backward products, in the engine's row-major layout
// (engine/model/linear_fast.h). Shared by gemm_ceiling (C++) and written out for the PyTorch side.
#pragma once

#include <string>
#include <vector>

namespace bench {

enum class GemmForm {
  kForward,     // Y (B, OC) = X (B, C) · W (OC, C)ᵀ
  kBackwardIn,  // dX (B, C) = dY (B, OC) · W (OC, C)
  kBackwardW,   // dW (OC, C) = dY (B, OC)ᵀ · X (B, C)
};

struct GemmCase {
  std::string name;
  GemmForm form;
  int B, C, OC;
  // 2·B·C·OC for every form.
  double Flops() const { return 2.0 * B * C * OC; }
  // (M×K)·(K×N) as a human reads it.
  std::string Shape() const {
    const std::string b = std::to_string(B), c = std::to_string(C), o = std::to_string(OC);
    switch (form) {
      case GemmForm::kForward:
        return "(" + b + "x" + c + ")*(" + c + "x" + o + ")";
      case GemmForm::kBackwardIn:
        return "(" + b + "x" + o + ")*(" + o + "x" + c + ")";
      case GemmForm::kBackwardW:
        return "(" + o + "x" + b + ")*(" + b + "x" + c + ")";
    }
    return "";
  }
};

inline const char* FormName(GemmForm f) {
  switch (f) {
    case GemmForm::kForward:
      return "fwd";
    case GemmForm::kBackwardIn:
      return "bwd_in";
    case GemmForm::kBackwardW:
      return "bwd_w";
  }
  return "?";
}

// Linear layers of one transformer block: QKV (256 → 768), MLP up (256 → 1024), MLP down
// (1024 → 256). (The attention output projection, 256 → 256, is the same kind of product and
// smaller; it is left out to keep the table short.)
inline std::vector<GemmCase> ModelGemms(int tokens) {
  struct Layer {
    const char* name;
    int C, OC;
  };
  const Layer layers[] = {{"qkv", 256, 768}, {"mlp_up", 256, 1024}, {"mlp_down", 1024, 256}};
  std::vector<GemmCase> out;
  for (const Layer& l : layers) {
    for (GemmForm f : {GemmForm::kForward, GemmForm::kBackwardIn, GemmForm::kBackwardW}) {
      out.push_back({std::string(l.name) + "." + FormName(f), f, tokens, l.C, l.OC});
    }
  }
  return out;
}

}  // namespace bench
