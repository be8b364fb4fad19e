#include "controlplane/http/ready_check.h"

namespace controlplane::http {

common::Status CachedCheck::Get() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool fresh = have_ && now_s_() - checked_at_ < ttl_s_;
    if (fresh || running_) {
      return have_ ? last_ : common::Unavailable("readiness check in progress");
    }
    running_ = true;
  }
  common::Status st = check_();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  have_ = true;
  last_ = st;
  // Stamped when the answer arrived: a slow check is not repeated at once.
  checked_at_ = now_s_();
  return st;
}

}  // namespace controlplane::http
