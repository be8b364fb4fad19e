#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/kernels/attention_padded.h"
#include "engine/kernels/attention_reference.h"
#include "engine/cpu/cpu_path.h"
#include "engine/kernels/attention_varlen.h"
#include "engine/kernels/attention_varlen_kernels.h"

namespace engine::kernels {
namespace {

std::vector<float> RandomVec(std::mt19937& rng, size_t n, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<int32_t> CuFromLengths(const std::vector<int>& lengths) {
  std::vector<int32_t> cu{0};
  for (int l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

// max |got − want| / max |want|: error relative to the tensor's scale, so entries near zero
// don't make a meaningless per-element ratio.
double RelativeError(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0.0 ? err : err / scale;
}

struct Case {
  std::vector<int> lengths;
  int H, D;
  bool causal;
  float stddev;  // of q, k: larger makes the softmax peakier
};

// Forward and backward of the varlen kernel against the float64 reference: through the public
// entry points (the process's CPU path), or straight through one path's table when given.
void CheckVarlenAgainstReference(const Case& c, uint32_t seed,
                                 const VarlenKernels* kernels = nullptr) {
  std::mt19937 rng(seed);
  const std::vector<int32_t> cu = CuFromLengths(c.lengths);
  const int T = cu.back(), H = c.H, D = c.D;
  const size_t n = static_cast<size_t>(T) * H * D;
  auto q = RandomVec(rng, n, c.stddev), k = RandomVec(rng, n, c.stddev), v = RandomVec(rng, n, 1);
  auto dout = RandomVec(rng, n, 1);

  AttentionWorkspace ws;
  const VarlenShape shape{T, H, D, c.causal};
  std::vector<float> out(n), lse(static_cast<size_t>(H) * T);
  std::vector<float> dq(n, 0.0f), dk(n, 0.0f), dv(n, 0.0f);
  if (kernels != nullptr) {
    kernels->forward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu, shape, &ws);
    kernels->backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                      out.data(), lse.data(), cu, shape, &ws);
  } else {
    ASSERT_TRUE(
        AttentionVarlenForward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu, shape, &ws)
            .ok());
    ASSERT_TRUE(AttentionVarlenBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), out.data(), lse.data(), cu, shape, &ws)
                    .ok());
  }

  const auto qd = ToDouble(q), kd = ToDouble(k), vd = ToDouble(v), doutd = ToDouble(dout);
  std::vector<double> rout(n), rlse(lse.size()), rdq(n), rdk(n), rdv(n);
  AttentionReferenceForward(rout.data(), rlse.data(), qd.data(), kd.data(), vd.data(), cu, T, H, D,
                            c.causal);
  AttentionReferenceBackward(rdq.data(), rdk.data(), rdv.data(), doutd.data(), qd.data(), kd.data(),
                             vd.data(), cu, T, H, D, c.causal);
  EXPECT_LT(RelativeError(out, rout), 1e-5);
  EXPECT_LT(RelativeError(lse, rlse), 1e-5);
  EXPECT_LT(RelativeError(dq, rdq), 1e-5);
  EXPECT_LT(RelativeError(dk, rdk), 1e-5);
  EXPECT_LT(RelativeError(dv, rdv), 1e-5);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  for (float x : dq) ASSERT_TRUE(std::isfinite(x));
}

TEST(AttentionVarlenTest, MatchesReferenceOnHandPickedSegments) {
  // Length 1, exactly one tile, one past a tile, several tiles with a ragged end, tiny ones.
  const std::vector<int> lengths = {1, 64, 65, 3, 200, 1, 17, 128, 129, 2};
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    CheckVarlenAgainstReference({lengths, 2, 32, causal, 1.0f}, 1);
    CheckVarlenAgainstReference({lengths, 3, 8, causal, 2.5f}, 2);
  }
}

TEST(AttentionVarlenTest, MatchesReferenceOnRandomSegments) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 8; ++trial) {
    std::uniform_int_distribution<int> num(1, 8), len(1, 300), dim(0, 3);
    std::vector<int> lengths(num(rng));
    for (int& l : lengths) l = len(rng);
    const int D = std::vector<int>{8, 16, 32, 24}[dim(rng)];
    const bool causal = trial % 2 == 1;
    SCOPED_TRACE("trial " + std::to_string(trial));
    CheckVarlenAgainstReference({lengths, 2, D, causal, 1.5f}, 100 + trial);
  }
}

// Every copy this CPU can run (the public entry points test only the process's own), on
// segments ragged against the register blocks and tiles: lengths around 8, 16, 32 and the
// 64-token tiles, and head dims that leave a column tail.
TEST(AttentionVarlenTest, EveryCpuPathMatchesReferenceOnRaggedSegments) {
  const std::vector<int> lengths = {1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 285};
  for (cpu::CpuPath path : cpu::SupportedCpuPaths()) {
    const VarlenKernels& k = path == cpu::CpuPath::kAvx512 ? Avx512VarlenKernels()
                             : path == cpu::CpuPath::kAvx2 ? Avx2VarlenKernels()
                                                           : Sse2VarlenKernels();
    EXPECT_STREQ(k.name, cpu::CpuPathName(path) == std::string("scalar") ? "sse2"
                                                                         : cpu::CpuPathName(path));
    for (bool causal : {false, true}) {
      for (int D : {32, 40, 8}) {
        SCOPED_TRACE(std::string(k.name) + (causal ? " causal" : " bidirectional") + " D " +
                     std::to_string(D));
        CheckVarlenAgainstReference({lengths, 2, D, causal, 1.5f}, 7 + D, &k);
      }
    }
  }
}

TEST(AttentionVarlenTest, SingleTokenSegmentIsItsValue) {
  const int H = 2, D = 4;
  const std::vector<int32_t> cu = {0, 1};
  std::mt19937 rng(3);
  auto q = RandomVec(rng, H * D, 1), k = RandomVec(rng, H * D, 1), v = RandomVec(rng, H * D, 1);
  auto dout = RandomVec(rng, H * D, 1);
  std::vector<float> out(H * D), lse(H), dq(H * D, 0), dk(H * D, 0), dv(H * D, 0);
  AttentionWorkspace ws;
  for (bool causal : {false, true}) {
    const VarlenShape shape{1, H, D, causal};
    ASSERT_TRUE(
        AttentionVarlenForward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu, shape, &ws)
            .ok());
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    ASSERT_TRUE(AttentionVarlenBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), out.data(), lse.data(), cu, shape, &ws)
                    .ok());
    for (int i = 0; i < H * D; ++i) {
      EXPECT_FLOAT_EQ(out[i], v[i]);  // softmax over one key is exactly 1
      EXPECT_FLOAT_EQ(dv[i], dout[i]);
      // P is constant, so no gradient reaches q or k; dP − delta cancels to rounding only.
      EXPECT_NEAR(dq[i], 0.0f, 1e-5f);
      EXPECT_NEAR(dk[i], 0.0f, 1e-5f);
    }
    for (float l : lse) EXPECT_TRUE(std::isfinite(l));
  }
}

TEST(AttentionVarlenTest, BackwardAccumulatesIntoGradients) {
  const std::vector<int32_t> cu = {0, 5, 70};
  const int T = 70, H = 1, D = 8;
  std::mt19937 rng(9);
  auto q = RandomVec(rng, T * D, 1), k = RandomVec(rng, T * D, 1), v = RandomVec(rng, T * D, 1);
  auto dout = RandomVec(rng, T * D, 1);
  std::vector<float> out(T * D), lse(T), dq(T * D, 0), dk(T * D, 0), dv(T * D, 0);
  AttentionWorkspace ws;
  const VarlenShape shape{T, H, D, false};
  ASSERT_TRUE(
      AttentionVarlenForward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu, shape, &ws)
          .ok());
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_TRUE(AttentionVarlenBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), out.data(), lse.data(), cu, shape, &ws)
                    .ok());
  }
  std::vector<float> dq1(T * D, 0), dk1(T * D, 0), dv1(T * D, 0);
  ASSERT_TRUE(AttentionVarlenBackward(dq1.data(), dk1.data(), dv1.data(), dout.data(), q.data(),
                                      k.data(), v.data(), out.data(), lse.data(), cu, shape, &ws)
                  .ok());
  for (int i = 0; i < T * D; ++i) {
    EXPECT_FLOAT_EQ(dq[i], 2 * dq1[i]);
    EXPECT_FLOAT_EQ(dk[i], 2 * dk1[i]);
    EXPECT_FLOAT_EQ(dv[i], 2 * dv1[i]);
  }
  // Scratch was sized on the first calls of each kind and then reused.
  EXPECT_LE(ws.allocations(), 2);
}

TEST(AttentionVarlenTest, RejectsBadCuSeqlens) {
  AttentionWorkspace ws;
  std::vector<float> buf(64), lse(8);
  const VarlenShape shape{8, 1, 8, false};
  for (const std::vector<int32_t>& cu :
       std::vector<std::vector<int32_t>>{{0, 5, 7}, {1, 8}, {0, 5, 3, 8}, {}}) {
    EXPECT_EQ(AttentionVarlenForward(buf.data(), lse.data(), buf.data(), buf.data(), buf.data(), cu,
                                     shape, &ws)
                  .code(),
              common::Code::kInvalidArgument);
  }
}

// The float64 reference's backward against central finite differences of its forward, for
// L = Σ w ∘ out: this is what makes the reference a reference for gradients.
TEST(AttentionReferenceTest, BackwardMatchesFiniteDifferences) {
  const std::vector<int32_t> cu = {0, 3, 4, 7};
  const int T = 7, H = 2, D = 4;
  const size_t n = static_cast<size_t>(T) * H * D;
  std::mt19937 rng(17);
  for (bool causal : {false, true}) {
    auto q = ToDouble(RandomVec(rng, n, 1)), k = ToDouble(RandomVec(rng, n, 1));
    auto v = ToDouble(RandomVec(rng, n, 1)), w = ToDouble(RandomVec(rng, n, 1));
    std::vector<double> dq(n), dk(n), dv(n), out(n), lse(H * T);
    AttentionReferenceBackward(dq.data(), dk.data(), dv.data(), w.data(), q.data(), k.data(),
                               v.data(), cu, T, H, D, causal);
    auto loss = [&]() {
      AttentionReferenceForward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu, T, H, D,
                                causal);
      double l = 0.0;
      for (size_t i = 0; i < n; ++i) l += w[i] * out[i];
      return l;
    };
    const double eps = 1e-6;
    for (auto [x, grad] : {std::pair{&q, &dq}, std::pair{&k, &dk}, std::pair{&v, &dv}}) {
      for (size_t i = 0; i < n; ++i) {
        const double saved = (*x)[i];
        (*x)[i] = saved + eps;
        const double up = loss();
        (*x)[i] = saved - eps;
        const double down = loss();
        (*x)[i] = saved;
        EXPECT_NEAR((*grad)[i], (up - down) / (2 * eps), 1e-7) << "element " << i;
      }
    }
  }
}

// The padded path on the same samples (padding filled with garbage) gives the varlen results on
// real tokens, and zero gradient into padding keys.
TEST(AttentionPaddedTest, AgreesWithVarlenOnTheSameSamples) {
  const std::vector<int> lengths = {37, 1, 90, 64, 5};
  const int B = static_cast<int>(lengths.size()), Tpad = 96, H = 2, D = 16;
  const std::vector<int32_t> cu = CuFromLengths(lengths);
  const int T = cu.back();
  const size_t n = static_cast<size_t>(T) * H * D, np = static_cast<size_t>(B) * Tpad * H * D;
  std::mt19937 rng(23);
  for (bool causal : {false, true}) {
    auto q = RandomVec(rng, n, 1.5f), k = RandomVec(rng, n, 1.5f), v = RandomVec(rng, n, 1);
    auto dout = RandomVec(rng, n, 1);
    // Padded copies: garbage in padding slots of q, k, v; zero output gradient there.
    auto pq = RandomVec(rng, np, 50), pk = RandomVec(rng, np, 50), pv = RandomVec(rng, np, 50);
    std::vector<float> pdout(np, 0.0f);
    std::vector<uint8_t> mask(static_cast<size_t>(B) * Tpad, 0);
    const size_t HD = static_cast<size_t>(H) * D;
    auto padded_at = [&](int b, int t) { return (static_cast<size_t>(b) * Tpad + t) * HD; };
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < lengths[b]; ++t) {
        const size_t src = static_cast<size_t>(cu[b] + t) * HD, dst = padded_at(b, t);
        std::copy_n(q.begin() + src, HD, pq.begin() + dst);
        std::copy_n(k.begin() + src, HD, pk.begin() + dst);
        std::copy_n(v.begin() + src, HD, pv.begin() + dst);
        std::copy_n(dout.begin() + src, HD, pdout.begin() + dst);
        mask[static_cast<size_t>(b) * Tpad + t] = 1;
      }
    }
    AttentionWorkspace ws;
    std::vector<float> out(n), lse(static_cast<size_t>(H) * T), dq(n, 0), dk(n, 0), dv(n, 0);
    const VarlenShape vshape{T, H, D, causal};
    ASSERT_TRUE(AttentionVarlenForward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu,
                                       vshape, &ws)
                    .ok());
    ASSERT_TRUE(AttentionVarlenBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                        k.data(), v.data(), out.data(), lse.data(), cu, vshape, &ws)
                    .ok());
    std::vector<float> pout(np), plse(static_cast<size_t>(B) * H * Tpad), pdq(np, 0), pdk(np, 0),
        pdv(np, 0);
    const PaddedShape pshape{B, Tpad, H, D, causal};
    ASSERT_TRUE(AttentionPaddedForward(pout.data(), plse.data(), pq.data(), pk.data(), pv.data(),
                                       mask.data(), pshape, &ws)
                    .ok());
    ASSERT_TRUE(AttentionPaddedBackward(pdq.data(), pdk.data(), pdv.data(), pdout.data(), pq.data(),
                                        pk.data(), pv.data(), pout.data(), plse.data(), mask.data(),
                                        pshape, &ws)
                    .ok());
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < Tpad; ++t) {
        for (size_t e = 0; e < HD; ++e) {
          const size_t p = padded_at(b, t) + e;
          if (t < lengths[b]) {
            const size_t s = static_cast<size_t>(cu[b] + t) * HD + e;
            ASSERT_NEAR(pout[p], out[s], 1e-5f);
            ASSERT_NEAR(pdq[p], dq[s], 1e-4f);
            ASSERT_NEAR(pdk[p], dk[s], 1e-4f);
            ASSERT_NEAR(pdv[p], dv[s], 1e-4f);
          } else {
            ASSERT_EQ(pdk[p], 0.0f);
            ASSERT_EQ(pdv[p], 0.0f);
            ASSERT_EQ(pdq[p], 0.0f);
          }
        }
        if (t < lengths[b]) {
          for (int h = 0; h < H; ++h) {
            ASSERT_NEAR(plse[(static_cast<size_t>(b) * H + h) * Tpad + t],
                        lse[static_cast<size_t>(h) * T + cu[b] + t], 1e-5f);
          }
        }
      }
    }
  }
}

TEST(AttentionPaddedTest, RejectsASequenceWithNoVisibleKey) {
  AttentionWorkspace ws;
  std::vector<float> buf(2 * 4 * 8), lse(2 * 4);
  const std::vector<uint8_t> mask = {1, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(AttentionPaddedForward(buf.data(), lse.data(), buf.data(), buf.data(), buf.data(),
                                      mask.data(), {2, 4, 1, 8, false}, &ws)
                   .ok());
}

}  // namespace
}  // namespace engine::kernels
