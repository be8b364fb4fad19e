// /readyz's answer, bounded: the check behind it (a round trip to PostgreSQL and the schema
// version) runs at most once per `ttl_s`, whatever the rate of probes, and a probe that comes
// while a check is running gets the previous answer instead of queuing behind it. So a fleet of
// load balancers probing every replica cannot add load to a database that is already in
// trouble, and a probe never waits longer than one check (itself bounded by the pool's wait).
#pragma once

#include <functional>
#include <mutex>

#include "common/status.h"

namespace controlplane::http {

class CachedCheck {
 public:
  CachedCheck(std::function<common::Status()> check, double ttl_s, std::function<double()> now_s)
      : check_(std::move(check)), ttl_s_(ttl_s), now_s_(std::move(now_s)) {}

  // The latest answer; runs the check first when that answer is older than the ttl and no
  // other caller is running it. Before the first check completes, concurrent callers are told
  // the check is in progress (unavailable).
  common::Status Get();

 private:
  const std::function<common::Status()> check_;
  const double ttl_s_;
  const std::function<double()> now_s_;
  std::mutex mu_;
  bool running_ = false;
  bool have_ = false;
  double checked_at_ = 0;
  common::Status last_;
};

}  // namespace controlplane::http
