#include "engine/model/mlp_policy.h"

#include <vector>

#include <gtest/gtest.h>

#include "engine/sim/rng.h"
#include "engine/testing/grad_check.h"

namespace engine {
namespace {

TEST(MlpPolicyTest, ParameterCountMatchesLayout) {
  MlpPolicy m({/*obs_dim=*/5, /*d_model=*/8, /*layers=*/2, /*out_dim=*/3});
  EXPECT_EQ(m.num_params(), size_t{(5 * 8 + 8) + (8 * 8 + 8) + (8 * 3 + 3)});
}

TEST(MlpPolicyTest, InitIsDeterministicPerSeed) {
  MlpPolicy a({5, 8, 2, 3}), b({5, 8, 2, 3}), c({5, 8, 2, 3});
  a.Init(7);
  b.Init(7);
  c.Init(8);
  std::vector<float> pa(a.params(), a.params() + a.num_params());
  std::vector<float> pb(b.params(), b.params() + b.num_params());
  std::vector<float> pc(c.params(), c.params() + c.num_params());
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, pc);
}

// The whole loss: every parameter's gradient from Backward against finite differences of the MSE
// loss from Forward.
TEST(MlpPolicyTest, LossGradientMatchesFiniteDifferences) {
  const int B = 4;
  MlpConfig c{/*obs_dim=*/5, /*d_model=*/6, /*layers=*/2, /*out_dim=*/4};
  MlpPolicy m(c);
  m.Init(3);
  Rng rng(11);
  // Larger-than-init weights so the GELUs work in their curved region, not near-linear.
  for (size_t i = 0; i < m.num_params(); ++i) m.params()[i] = static_cast<float>(rng.Normal());
  std::vector<float> obs(B * c.obs_dim), target(B * c.out_dim);
  for (auto& x : obs) x = static_cast<float>(rng.Normal());
  for (auto& x : target) x = static_cast<float>(rng.Normal());

  m.ZeroGrad();
  m.Forward(obs.data(), target.data(), B);
  m.Backward();
  std::vector<float> analytic(m.grads(), m.grads() + m.num_params());
  auto loss = [&] { return static_cast<double>(m.Forward(obs.data(), target.data(), B)); };
  testing::ExpectGradientsMatch("dparams", m.params(), analytic.data(),
                                static_cast<int>(m.num_params()), loss, 1e-3f, 2e-3, 2e-2);
  // A check that cannot fail is a defect: make sure the gradient is not trivially zero.
  double sq = 0.0;
  for (float g : analytic) sq += g * g;
  EXPECT_GT(sq, 1e-3);
}

TEST(MlpPolicyTest, ForwardWithoutTargetGivesOutputOnly) {
  MlpPolicy m({3, 4, 1, 2});
  m.Init(0);
  float obs[] = {0.1f, 0.2f, 0.3f};
  EXPECT_EQ(m.Forward(obs, nullptr, 1), 0.0f);
  EXPECT_TRUE(m.output()[0] != 0.0f || m.output()[1] != 0.0f);
}

}  // namespace
}  // namespace engine
