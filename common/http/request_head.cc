#include "common/http/request_head.h"

#include <algorithm>
#include <cctype>

#include "common/parse_int.h"

namespace common::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool NameIs(std::string_view name, std::string_view want) {
  return name.size() == want.size() &&
         std::equal(name.begin(), name.end(), want.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

bool IsIdentity(std::string_view value) { return value.empty() || NameIs(value, "identity"); }

}  // namespace

RequestHead ParseRequestHead(std::string_view head) {
  RequestHead h;
  size_t eol = head.find('\n');
  std::string_view line = Trim(head.substr(0, eol));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    h.error = "malformed request line";
    return h;
  }
  h.method = std::string(line.substr(0, sp1));
  h.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  while (eol != std::string_view::npos) {
    size_t start = eol + 1;
    eol = head.find('\n', start);
    std::string_view field = head.substr(start, eol == std::string_view::npos ? eol : eol - start);
    size_t colon = field.find(':');
    if (colon == std::string_view::npos) continue;  // the blank line, or not a field
    std::string_view name = field.substr(0, colon);
    std::string_view value = Trim(field.substr(colon + 1));
    if (NameIs(name, "content-length")) {
      // 1*DIGIT (RFC 9110): ParseInt64 refuses signs, blanks and hex; "-0" is left to refuse.
      const auto n = common::ParseInt64(value, 0);
      if (!n.ok() || value.starts_with('-')) {
        h.error = "Content-Length is not a number of bytes below 2^63";
        continue;
      }
      const auto bytes = static_cast<uint64_t>(*n);
      if (h.content_length && *h.content_length != bytes) h.error = "conflicting Content-Length";
      h.content_length = bytes;
    } else if (NameIs(name, "transfer-encoding")) {
      h.has_transfer_encoding = h.has_transfer_encoding || !IsIdentity(value);
    } else if (NameIs(name, "content-encoding")) {
      h.has_content_encoding = h.has_content_encoding || !IsIdentity(value);
    } else if (NameIs(name, "authorization")) {
      h.has_bearer = value.rfind("Bearer ", 0) == 0;
    }
  }
  return h;
}

std::string_view TargetPath(std::string_view target) { return target.substr(0, target.find('?')); }

std::string QueryValue(std::string_view target, std::string_view name) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? "" : std::string(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace common::http
