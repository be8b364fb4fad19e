#include "engine/model/layers.h"

#include <cmath>

namespace engine {

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int B,
                   int C, int OC) {
  for (int b = 0; b < B; ++b) {
    const float* x = inp + static_cast<long>(b) * C;
    float* y = out + static_cast<long>(b) * OC;
    for (int o = 0; o < OC; ++o) {
      const float* w = weight + static_cast<long>(o) * C;
      float acc = bias != nullptr ? bias[o] : 0.0f;
      for (int i = 0; i < C; ++i) acc += x[i] * w[i];
      y[o] = acc;
    }
  }
}

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int B, int C, int OC) {
  for (int b = 0; b < B; ++b) {
    const float* dy = dout + static_cast<long>(b) * OC;
    const float* x = inp + static_cast<long>(b) * C;
    float* dx = dinp != nullptr ? dinp + static_cast<long>(b) * C : nullptr;
    for (int o = 0; o < OC; ++o) {
      const float g = dy[o];
      const float* w = weight + static_cast<long>(o) * C;
      float* dw = dweight + static_cast<long>(o) * C;
      if (dx != nullptr) {
        for (int i = 0; i < C; ++i) dx[i] += g * w[i];
      }
      for (int i = 0; i < C; ++i) dw[i] += g * x[i];
      if (dbias != nullptr) dbias[o] += g;
    }
  }
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
}

void GeluForward(float* out, const float* inp, int N) {
  for (int i = 0; i < N; ++i) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int N) {
  for (int i = 0; i < N; ++i) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    float tanh_arg = kGeluScale * (x + cube);
    float tanh_out = std::tanh(tanh_arg);
    float sech2 = 1.0f - tanh_out * tanh_out;
    float local = 0.5f * (1.0f + tanh_out) +
                  0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += local * dout[i];
  }
}

}  // namespace engine
