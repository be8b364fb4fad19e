#include "common/request_id.h"

#include "common/crypto.h"

namespace common {

bool IsSafeRequestId(const std::string& id) {
  if (id.empty() || id.size() > kMaxRequestIdLength) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string RequestIdFor(const std::string& incoming) {
  if (IsSafeRequestId(incoming)) return incoming;
  return RandomToken().substr(0, 16);
}

}  // namespace common
