#include "engine/model/layers.h"

#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/testing/grad_check.h"

namespace engine {
namespace {

std::vector<float> RandomVec(common::Rng& rng, int n, double scale = 1.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale * rng.Normal());
  return v;
}

// L = sum_i w_i * y_i for fixed random w: dL/dy = w, so every output's gradient path is used.
double WeightedSum(const std::vector<float>& y, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

TEST(LinearTest, ForwardMatchesHandComputed) {
  // inp (1, 2), weight (2, 2), bias (2)
  float inp[] = {1.0f, 2.0f};
  float w[] = {1.0f, 2.0f, 3.0f, 4.0f};
  float b[] = {0.5f, -1.0f};
  float out[2];
  LinearForward(out, inp, w, b, 1, 2, 2);
  EXPECT_FLOAT_EQ(out[0], 1 * 1 + 2 * 2 + 0.5f);
  EXPECT_FLOAT_EQ(out[1], 1 * 3 + 2 * 4 - 1.0f);
}

TEST(LinearTest, BackwardMatchesFiniteDifferences) {
  const int B = 3, C = 5, OC = 4;
  common::Rng rng(1);
  auto inp = RandomVec(rng, B * C), weight = RandomVec(rng, OC * C), bias = RandomVec(rng, OC);
  auto wout = RandomVec(rng, B * OC);  // dL/dout
  std::vector<float> out(B * OC);
  auto loss = [&] {
    LinearForward(out.data(), inp.data(), weight.data(), bias.data(), B, C, OC);
    return WeightedSum(out, wout);
  };
  std::vector<float> dinp(B * C, 0.0f), dweight(OC * C, 0.0f), dbias(OC, 0.0f);
  LinearBackward(dinp.data(), dweight.data(), dbias.data(), wout.data(), inp.data(), weight.data(),
                 B, C, OC);
  testing::ExpectGradientsMatch("dinp", inp.data(), dinp.data(), B * C, loss);
  testing::ExpectGradientsMatch("dweight", weight.data(), dweight.data(), OC * C, loss);
  testing::ExpectGradientsMatch("dbias", bias.data(), dbias.data(), OC, loss);
}

TEST(LinearTest, BackwardAccumulates) {
  float inp[] = {1.0f}, w[] = {2.0f}, dout[] = {3.0f};
  float dinp[] = {10.0f}, dw[] = {10.0f}, db[] = {10.0f};
  LinearBackward(dinp, dw, db, dout, inp, w, 1, 1, 1);
  EXPECT_FLOAT_EQ(dinp[0], 10.0f + 3.0f * 2.0f);
  EXPECT_FLOAT_EQ(dw[0], 10.0f + 3.0f * 1.0f);
  EXPECT_FLOAT_EQ(db[0], 13.0f);
}

TEST(GeluTest, ForwardKnownValues) {
  float inp[] = {0.0f, 1.0f, -1.0f, 10.0f};
  float out[4];
  GeluForward(out, inp, 4);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.841192f, 1e-5);  // tanh approximation of GELU(1)
  EXPECT_NEAR(out[2], -0.158808f, 1e-5);
  EXPECT_NEAR(out[3], 10.0f, 1e-5);
}

TEST(GeluTest, BackwardMatchesFiniteDifferences) {
  const int N = 64;
  common::Rng rng(2);
  auto inp = RandomVec(rng, N, 2.0), wout = RandomVec(rng, N);
  std::vector<float> out(N);
  auto loss = [&] {
    GeluForward(out.data(), inp.data(), N);
    return WeightedSum(out, wout);
  };
  std::vector<float> dinp(N, 0.0f);
  GeluBackward(dinp.data(), inp.data(), wout.data(), N);
  testing::ExpectGradientsMatch("dinp", inp.data(), dinp.data(), N, loss, 1e-3f);
}

}  // namespace
}  // namespace engine
