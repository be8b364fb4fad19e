// libFuzzer target: the tar reader (storage/tar_reader.h) on arbitrary archive bytes, every
// member's header and data read through, with small limits.
//
// Properties: no crash, no sanitizer report; every refusal says what is wrong; every member the
// reader hands out has a normalised relative path (no leading '/', no "", "." or ".." component,
// no control character) within the name bound, a size within the per-file limit, data of exactly
// that size, and no more members or bytes in all than the limits allow.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "storage/tar_reader.h"

namespace {

void Fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "broken property: %s %s\n", what, detail.c_str());
  std::abort();
}

void CheckPath(const std::string& p) {
  if (p.empty()) Fail("empty path");
  if (p.size() > storage::kTarMaxPathBytes) Fail("path over the bound", p);
  if (p.front() == '/' || p.back() == '/') Fail("path not relative or with a trailing '/'", p);
  size_t begin = 0;
  while (begin <= p.size()) {
    size_t end = p.find('/', begin);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") Fail("unnormalised component", p);
    begin = end + 1;
  }
  for (unsigned char c : p) {
    if (c < 0x20 || c == 0x7f) Fail("control character in a path", p);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  storage::TarLimits limits;
  limits.max_members = 64;
  limits.max_file_bytes = 64 << 10;
  limits.max_total_bytes = 256 << 10;
  size_t at = 0;
  storage::TarReader reader(
      "fuzz.tar",
      [&](char* buf, size_t n) -> common::Result<size_t> {
        const size_t k = std::min(n, size - at);
        std::memcpy(buf, data + at, k);
        at += k;
        return k;
      },
      limits);
  int64_t members = 0, total = 0;
  char buf[4096];
  for (;;) {
    auto e = reader.Next();
    if (!e.ok()) {
      if (e.status().message().empty()) Fail("an empty error message");
      return 0;
    }
    if (!*e) break;
    if (++members > limits.max_members) Fail("more members than the limit");
    CheckPath((*e)->path);
    if ((*e)->size < 0 || (*e)->size > limits.max_file_bytes) Fail("size past the limit");
    if ((*e)->type == storage::TarEntry::Type::kDirectory && (*e)->size != 0) {
      Fail("a directory with data");
    }
    int64_t got = 0;
    for (;;) {
      auto n = reader.ReadData(buf, sizeof buf);
      if (!n.ok()) {
        if (n.status().message().empty()) Fail("an empty error message");
        return 0;
      }
      if (*n == 0) break;
      got += static_cast<int64_t>(*n);
    }
    if (got != (*e)->size) Fail("data differs from the header's size");
    total += got;
    if (total > limits.max_total_bytes) Fail("more bytes than the limit");
  }
  return 0;
}
