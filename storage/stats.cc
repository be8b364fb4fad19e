#include "storage/stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace storage {

namespace {

int64_t Groups(const KeySpec& k) { return k.frame_shape.empty() ? 1 : k.frame_shape.back(); }

template <typename T>
void EpisodeMoments(const uint8_t* bytes, int64_t count, int64_t groups, std::vector<double>* n,
                    std::vector<double>* mean, std::vector<double>* m2, std::vector<double>* mn,
                    std::vector<double>* mx) {
  const T* v = reinterpret_cast<const T*>(bytes);  // arrays are allocated by std::vector
  std::vector<double> sum(groups, 0.0);
  n->assign(groups, 0.0);
  mn->assign(groups, std::numeric_limits<double>::infinity());
  mx->assign(groups, -std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < count; ++i) {
    double x = static_cast<double>(v[i]);
    int64_t g = i % groups;
    sum[g] += x;
    (*n)[g] += 1;
    (*mn)[g] = std::min((*mn)[g], x);
    (*mx)[g] = std::max((*mx)[g], x);
  }
  mean->assign(groups, 0.0);
  m2->assign(groups, 0.0);
  for (int64_t g = 0; g < groups; ++g) (*mean)[g] = (*n)[g] > 0 ? sum[g] / (*n)[g] : 0.0;
  // Second pass over the episode: sums of squared deviations from its own mean stay accurate
  // where Σx² − n·mean² would cancel.
  for (int64_t i = 0; i < count; ++i) {
    double d = static_cast<double>(v[i]) - (*mean)[i % groups];
    (*m2)[i % groups] += d * d;
  }
}

// Four tables per group, taken in turn by consecutive rows: a run of equal bytes (flat image
// regions) then increments four counters instead of waiting on one. uint32 counters are flushed
// before they could wrap.
template <int kGroups>
void CountRows(const uint8_t* data, int64_t rows, int64_t groups_rt,
               std::array<uint64_t, 256>* counts) {
  const int64_t G = kGroups > 0 ? kGroups : groups_rt;
  constexpr int64_t kBlockRows = int64_t{1} << 30;  // < 2^32 increments per counter
  std::vector<uint32_t> tables(static_cast<size_t>(4 * G * 256));
  for (int64_t begin = 0; begin < rows; begin += kBlockRows) {
    const int64_t end = std::min(rows, begin + kBlockRows);
    std::fill(tables.begin(), tables.end(), 0u);
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* p = data + r * G;
      uint32_t* t = tables.data() + (r & 3) * G * 256;
      for (int64_t g = 0; g < G; ++g) ++t[g * 256 + p[g]];
    }
    for (int64_t q = 0; q < 4; ++q) {
      for (int64_t g = 0; g < G; ++g) {
        const uint32_t* t = tables.data() + (q * G + g) * 256;
        for (int v = 0; v < 256; ++v) counts[g][v] += t[v];
      }
    }
  }
}

}  // namespace

void CountBytesByGroup(const uint8_t* data, int64_t count, int64_t groups,
                       std::array<uint64_t, 256>* counts) {
  if (groups <= 0 || count <= 0) return;
  const int64_t rows = count / groups;
  switch (groups) {
    case 1: CountRows<1>(data, rows, 1, counts); break;
    case 3: CountRows<3>(data, rows, 3, counts); break;
    case 4: CountRows<4>(data, rows, 4, counts); break;
    default: CountRows<0>(data, rows, groups, counts); break;
  }
  // A count that is not whole rows (not made by the writer, but defined): the tail by index.
  for (int64_t i = rows * groups; i < count; ++i) ++counts[i % groups][data[i]];
}

void StatsAccumulator::Moments::Merge(double n2, double mean2, double m22, double min2,
                                      double max2) {
  if (n2 == 0) return;
  if (n == 0) {
    n = n2, mean = mean2, m2 = m22, min = min2, max = max2;
    return;
  }
  double total = n + n2;
  double delta = mean2 - mean;
  mean += delta * n2 / total;
  m2 += m22 + delta * delta * n * n2 / total;
  n = total;
  min = std::min(min, min2);
  max = std::max(max, max2);
}

void StatsAccumulator::AddArray(KeyAcc* acc, const Array& a) {
  int64_t groups = Groups(a.spec);
  int64_t count = a.frames * a.spec.FrameElements();
  if (a.spec.dtype == DType::kU8) {
    CountBytesByGroup(a.data.data(), count, groups, acc->u8_counts.data());
    return;
  }
  std::vector<double> n, mean, m2, mn, mx;
  switch (a.spec.dtype) {
    case DType::kI32:
      EpisodeMoments<int32_t>(a.data.data(), count, groups, &n, &mean, &m2, &mn, &mx);
      break;
    case DType::kF32:
      EpisodeMoments<float>(a.data.data(), count, groups, &n, &mean, &m2, &mn, &mx);
      break;
    default:
      EpisodeMoments<double>(a.data.data(), count, groups, &n, &mean, &m2, &mn, &mx);
      break;
  }
  for (int64_t g = 0; g < groups; ++g) acc->groups[g].Merge(n[g], mean[g], m2[g], mn[g], mx[g]);
}

void StatsAccumulator::Add(const Episode& episode, const std::vector<uint32_t>& sample_tokens) {
  if (keys_.empty()) {
    for (const Array& a : episode.arrays) {
      KeyAcc acc;
      acc.spec = a.spec;
      int64_t groups = Groups(a.spec);
      if (a.spec.dtype == DType::kU8) {
        acc.u8_counts.assign(groups, std::array<uint64_t, 256>{});
      } else {
        acc.groups.assign(groups, Moments{});
      }
      keys_.push_back(std::move(acc));
    }
  }
  for (size_t k = 0; k < keys_.size() && k < episode.arrays.size(); ++k) {
    AddArray(&keys_[k], episode.arrays[k]);
  }
  totals_.episodes += 1;
  totals_.frames += static_cast<uint64_t>(episode.frames());
  for (uint32_t t : sample_tokens) {
    totals_.tokens += t;
    ++totals_.token_histogram[t];
  }
}

DatasetStats StatsAccumulator::Finish() const {
  DatasetStats out = totals_;
  for (const KeyAcc& acc : keys_) {
    KeyStats ks;
    ks.spec = acc.spec;
    std::vector<Moments> groups = acc.groups;
    // u8 counts become moments exactly: one merge per distinct value.
    for (const auto& counts : acc.u8_counts) {
      Moments m;
      for (int v = 0; v < 256; ++v) {
        if (counts[v]) m.Merge(static_cast<double>(counts[v]), v, 0.0, v, v);
      }
      groups.push_back(m);
    }
    for (const Moments& m : groups) {
      ks.min.push_back(m.min);
      ks.max.push_back(m.max);
      ks.mean.push_back(m.mean);
      ks.std.push_back(m.n > 0 ? std::sqrt(m.m2 / m.n) : 0.0);
    }
    out.keys.push_back(std::move(ks));
  }
  return out;
}

nlohmann::json DatasetStats::ToJson() const {
  nlohmann::json j;
  j["episodes"] = episodes;
  j["frames"] = frames;
  j["samples"] = frames;
  j["tokens"] = tokens;
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [t, n] : token_histogram) hist.push_back({t, n});
  j["token_histogram"] = hist;
  nlohmann::json key_list = nlohmann::json::array();
  for (const KeyStats& k : keys) {
    // NaN/Inf have no JSON spelling: a statistic that is not finite is written as null.
    auto finite = [](const std::vector<double>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
      return a;
    };
    key_list.push_back({{"name", k.spec.name},
                        {"dtype", DTypeName(k.spec.dtype)},
                        {"shape", k.spec.frame_shape},
                        {"min", finite(k.min)},
                        {"max", finite(k.max)},
                        {"mean", finite(k.mean)},
                        {"std", finite(k.std)}});
  }
  j["keys"] = key_list;
  return j;
}

common::Result<DatasetStats> DatasetStats::FromJson(const nlohmann::json& j) {
  try {
    DatasetStats s;
    s.episodes = j.at("episodes").get<uint64_t>();
    s.frames = j.at("frames").get<uint64_t>();
    s.tokens = j.at("tokens").get<uint64_t>();
    for (const auto& bin : j.at("token_histogram")) {
      s.token_histogram[bin.at(0).get<uint32_t>()] = bin.at(1).get<uint64_t>();
    }
    for (const auto& k : j.at("keys")) {
      KeyStats ks;
      ks.spec.name = k.at("name").get<std::string>();
      auto dt = DTypeFromName(k.at("dtype").get<std::string>());
      if (!dt) return common::InvalidArgument("stats: unknown dtype", "stats.keys.dtype");
      ks.spec.dtype = *dt;
      ks.spec.frame_shape = k.at("shape").get<std::vector<int64_t>>();
      auto nums = [](const nlohmann::json& a) {
        std::vector<double> v;
        for (const auto& x : a) v.push_back(x.is_null() ? std::nan("") : x.get<double>());
        return v;
      };
      ks.min = nums(k.at("min"));
      ks.max = nums(k.at("max"));
      ks.mean = nums(k.at("mean"));
      ks.std = nums(k.at("std"));
      s.keys.push_back(std::move(ks));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(std::string("stats: ") + e.what(), "stats");
  }
}

}  // namespace storage
