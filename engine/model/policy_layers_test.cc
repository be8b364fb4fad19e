// Finite-difference checks of every Forward/Backward pair in policy_layers.h. Each test builds a
// scalar L = Σ r ⊙ out with fixed random r (so dL/dout = r reaches every output), computes L in
// double, and compares the analytic gradient of every input and parameter with central
// differences (engine/testing/grad_check.h).
#include "engine/model/policy_layers.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/testing/grad_check.h"
#include "engine/testing/random_vectors.h"

namespace engine {
namespace {

using testing::ExpectGradientsMatch;

using testing::Random;

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

int Size(const std::vector<float>& v) { return static_cast<int>(v.size()); }

TEST(RmsNormTest, ForwardNormalisesRows) {
  const int N = 2, C = 4;
  std::vector<float> x = {1, 2, 3, 4, 0, 0, 0, 0}, w = {1, 1, 1, 2}, y(N * C), rstd(N);
  RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), N, C);
  const float r = 1.0f / std::sqrt((1 + 4 + 9 + 16) / 4.0f + kRmsNormEps);
  EXPECT_FLOAT_EQ(y[3], 4 * r * 2);
  EXPECT_FLOAT_EQ(rstd[0], r);
  EXPECT_EQ(y[5], 0.0f);  // an all-zero row (padding) stays zero, no NaN
}

TEST(RmsNormTest, BackwardMatchesFiniteDifferences) {
  const int N = 3, C = 8;
  common::Rng rng(1);
  auto x = Random(rng, N * C), w = Random(rng, C), r = Random(rng, N * C);
  std::vector<float> y(N * C), rstd(N);
  auto loss = [&] {
    RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), N, C);
    return Dot(y, r);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
  RmsNormBackward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  ExpectGradientsMatch("dinp", x.data(), dx.data(), N * C, loss, 1e-3f);
  ExpectGradientsMatch("dweight", w.data(), dw.data(), C, loss, 1e-3f);
}

TEST(EmbeddingTest, GatherAndScatterAreAdjoint) {
  const int N = 6, C = 5, V = 4;
  common::Rng rng(2);
  std::vector<int32_t> ids = {3, 0, -1, 3, 2, -1};  // repeated id and skipped rows
  auto table = Random(rng, V * C), r = Random(rng, N * C), base = Random(rng, N * C);
  std::vector<float> y(N * C);
  auto loss = [&] {
    y = base;
    EmbeddingForward(y.data(), ids.data(), table.data(), N, C);
    return Dot(y, r);
  };
  loss();
  EXPECT_EQ(y[2 * C], base[2 * C]);  // id -1 leaves the row alone
  std::vector<float> dtable(V * C, 0.0f);
  EmbeddingBackward(dtable.data(), ids.data(), r.data(), N, C);
  ExpectGradientsMatch("dtable", table.data(), dtable.data(), V * C, loss);
  EXPECT_EQ(dtable[1 * C], 0.0f);  // unused row
}

TEST(GatherRowsTest, ScatterAddIsTheAdjoint) {
  const int n = 4, C = 3, rows = 6;
  common::Rng rng(3);
  std::vector<int32_t> idx = {5, 1, 2, 0};
  auto inp = Random(rng, rows * C), r = Random(rng, n * C);
  std::vector<float> out(n * C);
  auto loss = [&] {
    GatherRows(out.data(), inp.data(), idx.data(), n, C);
    return Dot(out, r);
  };
  loss();
  std::vector<float> dinp(rows * C, 0.0f);
  ScatterAddRows(dinp.data(), r.data(), idx.data(), n, C);
  ExpectGradientsMatch("dinp", inp.data(), dinp.data(), rows * C, loss);
}

TEST(ResidualTest, BackwardMatchesFiniteDifferences) {
  const int n = 7;
  common::Rng rng(4);
  auto a = Random(rng, n), b = Random(rng, n), r = Random(rng, n);
  std::vector<float> y(n);
  auto loss = [&] {
    ResidualForward(y.data(), a.data(), b.data(), n);
    return Dot(y, r);
  };
  std::vector<float> da(n, 0.0f), db(n, 0.0f);
  ResidualBackward(da.data(), db.data(), r.data(), n);
  ExpectGradientsMatch("da", a.data(), da.data(), n, loss);
  ExpectGradientsMatch("db", b.data(), db.data(), n, loss);
}

TEST(TimeFeaturesTest, SinCosPairs) {
  std::vector<float> t = {0.0f, 0.37f}, out(2 * kTimeFeatures);
  TimeFeatures(out.data(), t.data(), 2);
  EXPECT_EQ(out[0], 0.0f);                  // sin(0)
  EXPECT_EQ(out[kTimeFeatures / 2], 1.0f);  // cos(0)
  EXPECT_NEAR(out[kTimeFeatures], std::sin(1000.0 * static_cast<double>(0.37f)), 1e-6);
  for (int j = 0; j < kTimeFeatures / 2; ++j) {
    const float s = out[kTimeFeatures + j], c = out[kTimeFeatures + kTimeFeatures / 2 + j];
    EXPECT_NEAR(s * s + c * c, 1.0f, 1e-5);
  }
}

TEST(GeluMlpTest, BackwardMatchesFiniteDifferences) {
  const int N = 5, C = 6, M = 10;
  common::Rng rng(5);
  auto x = Random(rng, N * C), w1 = Random(rng, M * C, 0.5), b1 = Random(rng, M, 0.5),
       w2 = Random(rng, C * M, 0.5), b2 = Random(rng, C, 0.5), r = Random(rng, N * C);
  std::vector<float> y(N * C), pre(N * M), act(N * M), dpre(N * M);
  auto loss = [&] {
    GeluMlpForward(y.data(), pre.data(), act.data(), x.data(), w1.data(), b1.data(), w2.data(),
                   b2.data(), N, C, M);
    return Dot(y, r);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw1(M * C, 0.0f), db1(M, 0.0f), dw2(C * M, 0.0f),
      db2(C, 0.0f);
  GeluMlpBackward(dx.data(), dw1.data(), db1.data(), dw2.data(), db2.data(), dpre.data(), r.data(),
                  x.data(), pre.data(), act.data(), w1.data(), w2.data(), N, C, M);
  ExpectGradientsMatch("dinp", x.data(), dx.data(), Size(x), loss, 1e-3f);
  ExpectGradientsMatch("dw1", w1.data(), dw1.data(), Size(w1), loss, 1e-3f);
  ExpectGradientsMatch("db1", b1.data(), db1.data(), Size(b1), loss, 1e-3f);
  ExpectGradientsMatch("dw2", w2.data(), dw2.data(), Size(w2), loss, 1e-3f);
  ExpectGradientsMatch("db2", b2.data(), db2.data(), Size(b2), loss, 1e-3f);
}

TEST(ActionHeadTest, BackwardMatchesFiniteDifferences) {
  const int N = 7, C = 5, A = 3, Na = 3;
  common::Rng rng(6);
  std::vector<int32_t> rows = {6, 2, 3};
  auto h = Random(rng, N * C), w = Random(rng, A * C), b = Random(rng, A), r = Random(rng, Na * A);
  std::vector<float> pred(Na * A), gathered(Na * C), scratch(Na * C);
  auto loss = [&] {
    ActionHeadForward(pred.data(), gathered.data(), h.data(), rows.data(), w.data(), b.data(), Na,
                      C, A);
    return Dot(pred, r);
  };
  loss();
  std::vector<float> dh(N * C, 0.0f), dw(A * C, 0.0f), db(A, 0.0f);
  ActionHeadBackward(dh.data(), dw.data(), db.data(), scratch.data(), r.data(), gathered.data(),
                     rows.data(), w.data(), Na, C, A);
  ExpectGradientsMatch("dhidden", h.data(), dh.data(), Size(h), loss);
  ExpectGradientsMatch("dweight", w.data(), dw.data(), Size(w), loss);
  ExpectGradientsMatch("dbias", b.data(), db.data(), Size(b), loss);
  EXPECT_EQ(dh[0], 0.0f);  // slot 0 is not an action slot
}

TEST(FlowLossTest, WeightedMeanAndGradient) {
  const int Na = 4, A = 3;
  common::Rng rng(7);
  auto pred = Random(rng, Na * A), target = Random(rng, Na * A);
  std::vector<float> weight = {1.0f, 0.0f, 2.0f, 0.5f};
  const double norm = 3.5 * A;
  double expect = 0.0;
  for (int a = 0; a < Na; ++a) {
    for (int d = 0; d < A; ++d) {
      const double e = static_cast<double>(pred[a * A + d]) - target[a * A + d];
      expect += weight[a] * e * e;
    }
  }
  auto loss = [&] {
    return FlowLossForward(pred.data(), target.data(), weight.data(), Na, A, norm);
  };
  EXPECT_NEAR(loss(), expect / norm, 1e-12);
  std::vector<float> dpred(Na * A, 0.0f);
  FlowLossBackward(dpred.data(), pred.data(), target.data(), weight.data(), Na, A, norm);
  ExpectGradientsMatch("dpred", pred.data(), dpred.data(), Na * A, loss, 1e-3f);
  EXPECT_EQ(dpred[A], 0.0f);  // weight 0: no gradient
}

}  // namespace
}  // namespace engine
