#include "controlplane/http/rate_limiter.h"

#include <algorithm>

namespace controlplane::http {

namespace {
constexpr double kIdleForgetSeconds = 60;
}  // namespace

double RateLimiter::Take(int64_t key, double now_s) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (now_s - last_sweep_s_ > kIdleForgetSeconds) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = now_s - it->second.last_s > kIdleForgetSeconds ? buckets_.erase(it) : std::next(it);
    }
    last_sweep_s_ = now_s;
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now_s});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst_, b.tokens + (now_s - b.last_s) * rate_);
    b.last_s = now_s;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  return (1 - b.tokens) / rate_;
}

}  // namespace controlplane::http
