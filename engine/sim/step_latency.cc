#include "engine/sim/step_latency.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/rng.h"

namespace engine::sim {
namespace {

constexpr uint64_t kLatencySalt = 0x6c6174656e6379ULL;  // "latency"

bool Finite(double x) { return std::isfinite(x); }

}  // namespace

common::Result<StepLatency> StepLatency::Create(const StepLatencyOptions& o) {
  auto bad = [](const char* field, const char* why) {
    return common::InvalidArgument(why, std::string("latency.") + field);
  };
  if (!Finite(o.mean_s) || o.mean_s < 0.0 || o.mean_s > 60.0) {
    return bad("mean_s", "must be in [0, 60] seconds");
  }
  if (!Finite(o.jitter) || o.jitter < 0.0 || o.jitter > 10.0)
    return bad("jitter", "must be in [0, 10]");
  if (!Finite(o.tail_probability) || o.tail_probability < 0.0 || o.tail_probability >= 1.0) {
    return bad("tail_probability", "must be in [0, 1)");
  }
  if (!Finite(o.tail_alpha) || o.tail_alpha <= 1.0 || o.tail_alpha > 100.0) {
    return bad("tail_alpha", "must be in (1, 100]");
  }
  if (!Finite(o.tail_scale) || o.tail_scale < 1.0 || o.tail_scale > 1000.0) {
    return bad("tail_scale", "must be in [1, 1000]");
  }
  if (!Finite(o.max_s) || o.max_s <= 0.0 || o.max_s > 600.0)
    return bad("max_s", "must be in (0, 600]");
  return StepLatency(o);
}

StepLatency::StepLatency(const StepLatencyOptions& o) : options_(o) {
  sigma_ = std::sqrt(std::log1p(o.jitter * o.jitter));
  mu_ = o.mean_s > 0.0 ? std::log(o.mean_s) - 0.5 * sigma_ * sigma_ : 0.0;
}

double StepLatency::Sample(uint64_t env, uint64_t step) const {
  const StepLatencyOptions& o = options_;
  if (o.mean_s <= 0.0) return 0.0;
  common::Rng rng = common::Rng::ForKey(o.seed, kLatencySalt, env, step);
  double x;
  if (rng.Uniform() < o.tail_probability) {
    // Inverse CDF; 1 − U is in (0, 1], so the power is finite.
    x = o.tail_scale * o.mean_s * std::pow(1.0 - rng.Uniform(), -1.0 / o.tail_alpha);
  } else {
    x = sigma_ > 0.0 ? std::exp(mu_ + sigma_ * rng.Normal()) : o.mean_s;
  }
  return std::min(x, o.max_s);
}

double StepLatency::ExpectedSeconds() const {
  const StepLatencyOptions& o = options_;
  const double tail = o.tail_alpha * o.tail_scale * o.mean_s / (o.tail_alpha - 1.0);
  return (1.0 - o.tail_probability) * o.mean_s + o.tail_probability * tail;
}

void StepLatency::Wait(double seconds, WaitMode mode) {
  if (!(seconds > 0.0)) return;
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  if (mode == WaitMode::kSleep) {
    std::this_thread::sleep_until(until);
    return;
  }
  while (Clock::now() < until) {
  }
}

}  // namespace engine::sim
