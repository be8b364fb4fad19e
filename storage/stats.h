// Dataset statistics gathered while episodes are written: counts, the histogram of sample
// token lengths (what a packer plans rows from), and per-key shape and min/max/mean/std for
// normalisation. Moments are kept per element of a key's last dimension: per joint for a
// low-dim vector, per channel for an image, one for a scalar per frame.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/episode.h"

namespace storage {

struct KeyStats {
  KeySpec spec;
  std::vector<double> min, max, mean, std;  // one per element of the last dimension
};

struct DatasetStats {
  uint64_t episodes = 0;
  uint64_t frames = 0;                           // = samples: one sample per frame
  uint64_t tokens = 0;                           // Σ sample token counts
  std::map<uint32_t, uint64_t> token_histogram;  // sample token count -> samples
  std::vector<KeyStats> keys;

  nlohmann::json ToJson() const;
  static common::Result<DatasetStats> FromJson(const nlohmann::json& j);
};

// counts[i % groups][data[i]] += 1 for i < count: the per-channel byte histogram of u8 keys
// (counts holds `groups` tables), written for speed (it ran at a third of an AV1 import's time
// with one counter per value); tested against that loop.
void CountBytesByGroup(const uint8_t* data, int64_t count, int64_t groups,
                       std::array<uint64_t, 256>* counts);

class StatsAccumulator {
 public:
  // The first episode fixes the schema; later ones must match it (the writer checks first).
  void Add(const Episode& episode, const std::vector<uint32_t>& sample_tokens);
  DatasetStats Finish() const;

 private:
  struct Moments {  // Chan et al.'s parallel merge of count/mean/M2
    double n = 0, mean = 0, m2 = 0, min = 0, max = 0;
    void Merge(double n2, double mean2, double m22, double min2, double max2);
  };
  struct KeyAcc {
    KeySpec spec;
    std::vector<Moments> groups;
    std::vector<std::array<uint64_t, 256>> u8_counts;  // u8 keys: exact per-value counts
  };
  void AddArray(KeyAcc* acc, const Array& a);

  DatasetStats totals_;
  std::vector<KeyAcc> keys_;
};

}  // namespace storage
