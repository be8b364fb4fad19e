#include "engine/eval/policy_actor.h"

#include <algorithm>

#include "common/rng.h"

namespace engine::eval {

common::Status FlowPolicyActor::Act(std::span<const PolicySample> obs, uint64_t key,
                                    std::vector<float>* actions) {
  const PolicyConfig& c = model_.config();
  const int n = static_cast<int>(obs.size()), H = c.action_horizon, A = c.action_dim;
  if (n == 0) return common::InvalidArgument("no observations");
  std::vector<int32_t> lengths(n);
  int longest = 1;
  for (int i = 0; i < n; ++i) {
    lengths[i] = obs[i].NumTokens(H);
    longest = std::max(longest, lengths[i]);
  }
  EMBODY_ASSIGN_OR_RETURN(plan, OneSamplePerRow(lengths, longest));
  EMBODY_RETURN_IF_ERROR(BuildPackedBatchInto(obs, plan, H, A, &batch_));
  // One sample per row, in order: the batch's action rows are sample-major.
  noise_.resize(static_cast<size_t>(n) * H * A);
  common::Rng rng = common::Rng::ForKey(key, 0x666c6f77ULL);  // "flow"
  for (float& x : noise_) x = static_cast<float>(rng.Normal());
  chunks_.resize(noise_.size());
  EMBODY_RETURN_IF_ERROR(
      model_.SampleActions(&batch_, noise_.data(), inference_steps_, chunks_.data()));
  actions->resize(static_cast<size_t>(n) * A);
  for (int i = 0; i < n; ++i) {
    std::copy_n(chunks_.data() + static_cast<size_t>(i) * H * A, A,
                actions->data() + static_cast<size_t>(i) * A);
  }
  return common::Status::Ok();
}

common::Status GaussianMeanActor::Act(std::span<const PolicySample> obs, uint64_t /*key*/,
                                      std::vector<float>* actions) {
  EMBODY_RETURN_IF_ERROR(policy_.Forward(obs));
  const size_t count = obs.size() * static_cast<size_t>(policy_.action_dim());
  actions->assign(policy_.mean(), policy_.mean() + count);
  return common::Status::Ok();
}

}  // namespace engine::eval
