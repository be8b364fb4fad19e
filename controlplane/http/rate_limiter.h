// Per-token request rate limit: one token bucket per bearer token, refilled at `rate` requests
// per second up to `burst`. A request that finds its bucket empty is refused with 429 and a
// Retry-After of the seconds until a token is back. Buckets idle for a minute are forgotten, so
// memory follows the tokens in use. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace controlplane::http {

class RateLimiter {
 public:
  // rate <= 0: no limit.
  RateLimiter(double rate, double burst) : rate_(rate), burst_(burst > 0 ? burst : 1) {}

  bool enabled() const { return rate_ > 0; }
  // Takes one request from `key`'s bucket at time `now_s` (monotonic seconds). Returns 0 when
  // allowed, else the seconds to wait (> 0).
  double Take(int64_t key, double now_s);

 private:
  struct Bucket {
    double tokens = 0;
    double last_s = 0;
  };
  const double rate_;
  const double burst_;
  std::mutex mu_;
  std::unordered_map<int64_t, Bucket> buckets_;
  double last_sweep_s_ = 0;
};

}  // namespace controlplane::http
