#include "engine/data/dataset_stream.h"

#include <algorithm>

#include "storage/partition.h"

namespace engine::data {

DatasetStream::DatasetStream(uint64_t seed, std::vector<int32_t> tokens)
    : seed_(seed), tokens_(std::move(tokens)) {
  double sum = 0.0;
  for (int32_t t : tokens_) {
    max_tokens_ = std::max(max_tokens_, t);
    sum += t;
  }
  mean_tokens_ = tokens_.empty() ? 0.0 : sum / static_cast<double>(tokens_.size());
}

std::shared_ptr<const std::vector<uint64_t>> DatasetStream::Order(uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [e, order] : orders_) {
    if (e == epoch) return order;
  }
  auto order = std::make_shared<const std::vector<uint64_t>>(
      storage::EpochOrder(samples(), seed_, epoch, /*shuffle=*/true));
  if (orders_.size() == 2) orders_.erase(orders_.begin());
  orders_.emplace_back(epoch, order);
  return order;
}

uint64_t DatasetStream::SampleAt(uint64_t g) const { return (*Order(Epoch(g)))[InEpoch(g)]; }

}  // namespace engine::data
