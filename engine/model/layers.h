// Plain-loop reference Linear and GELU layers as Forward/Backward function pairs over float
// arrays (llm.c style): the reference the fast Eigen versions (linear_fast.h) are tested against.
// Each backward *accumulates* (+=) into its gradient outputs, so gradients of a tensor used twice
// add up; callers zero gradient buffers once per step.
//
// Shapes are given in comments as (rows, cols), row-major. B = batch rows, C = input features,
// OC = output features. No allocation, no shape checks inside: callers check once at entry.
#pragma once

namespace engine {

// out = inp @ weight^T + bias
// out (B, OC), inp (B, C), weight (OC, C), bias (OC) or nullptr.
void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int B,
                   int C, int OC);
// dinp (B, C) may be nullptr (first layer: the input needs no gradient); dbias may be nullptr
// when bias was.
void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int B, int C, int OC);

// GELU, tanh approximation (as GPT-2): out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// out, inp (N)
void GeluForward(float* out, const float* inp, int N);
void GeluBackward(float* dinp, const float* inp, const float* dout, int N);

}  // namespace engine
