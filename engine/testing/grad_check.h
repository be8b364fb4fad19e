// Finite-difference gradient checking for engine tests.
//
// Central differences of a scalar loss computed in double: the divisor is the perturbation that
// float actually applied ((x+eps) - (x-eps) after rounding), which removes most of float's
// representation error from the estimate.
#pragma once

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

namespace engine::testing {

inline double NumericGrad(float* x, const std::function<double()>& loss, float eps) {
  const float orig = *x;
  const float up = orig + eps, down = orig - eps;
  *x = up;
  const double lp = loss();
  *x = down;
  const double lm = loss();
  *x = orig;
  return (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
}

// Expects analytic[i] to match the numeric gradient of loss w.r.t. x[i] for i in [0, n).
inline void ExpectGradientsMatch(const char* what, float* x, const float* analytic, int n,
                                 const std::function<double()>& loss, float eps = 1e-2f,
                                 double atol = 1e-3, double rtol = 1e-2) {
  for (int i = 0; i < n; ++i) {
    const double numeric = NumericGrad(x + i, loss, eps);
    EXPECT_NEAR(analytic[i], numeric, atol + rtol * std::fabs(numeric)) << what << "[" << i << "]";
  }
}

}  // namespace engine::testing
