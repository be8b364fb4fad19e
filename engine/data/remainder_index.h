// RemainderIndex: the set of row remainders {0..max} that currently have at least one open row,
// answering "smallest remainder ≥ x" in O(max / 4096) word scans. Private to the packers.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace engine::data {

class RemainderIndex {
 public:
  explicit RemainderIndex(int max_value)
      : words_((max_value + 64) / 64, 0), summary_((words_.size() + 63) / 64, 0) {}

  void Insert(int v) {
    words_[v >> 6] |= uint64_t{1} << (v & 63);
    summary_[v >> 12] |= uint64_t{1} << ((v >> 6) & 63);
  }
  void Erase(int v) {
    uint64_t& w = words_[v >> 6];
    w &= ~(uint64_t{1} << (v & 63));
    if (w == 0) summary_[v >> 12] &= ~(uint64_t{1} << ((v >> 6) & 63));
  }
  // Smallest member ≥ v, or -1.
  int FindAtLeast(int v) const {
    size_t wi = static_cast<size_t>(v) >> 6;
    if (wi >= words_.size()) return -1;
    const uint64_t here = words_[wi] & (~uint64_t{0} << (v & 63));
    if (here != 0) return static_cast<int>(wi * 64 + std::countr_zero(here));
    // Next non-empty word after wi, via the summary.
    size_t next = wi + 1;
    size_t si = next >> 6;
    if (si >= summary_.size()) return -1;
    uint64_t s = (next & 63) == 0 ? summary_[si] : summary_[si] & (~uint64_t{0} << (next & 63));
    while (s == 0) {
      if (++si >= summary_.size()) return -1;
      s = summary_[si];
    }
    const size_t w = si * 64 + std::countr_zero(s);
    return static_cast<int>(w * 64 + std::countr_zero(words_[w]));
  }

 private:
  std::vector<uint64_t> words_;    // bit v: remainder v has an open row
  std::vector<uint64_t> summary_;  // bit w: words_[w] != 0
};

}  // namespace engine::data
