#include "engine/dist/fp8_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/fp8/codec.h"

namespace engine {
namespace {

constexpr size_t kBlock = fp8::kBlock;

}  // namespace

// One bucket's exchange. A chunk is chunk_blocks blocks of kBlock entries; rank j owns bucket
// entries [j · chunk_elems, (j + 1) · chunk_elems) ∩ [0, len). A record is one chunk on the wire:
// chunk_elems codes (zeros past len), then chunk_blocks fp32 scales.
struct Fp8Allreduce::Exchange {
  bool busy = false;
  int phase = 0;  // 0: nothing to exchange (world of one), 1: all-to-all, 2: all-gather
  CollectiveId inner = -1;
  float* data = nullptr;
  size_t offset = 0, len = 0;
  size_t chunk_blocks = 0, chunk_elems = 0, record_bytes = 0;
  std::vector<uint8_t> send;  // phase 1: W records; phase 2: this rank's record of sums
  std::vector<uint8_t> recv;  // W records
  std::vector<float> sum;     // chunk_elems
};

Fp8Allreduce::Fp8Allreduce(Communicator& comm, size_t n, Fp8AllreduceOptions options)
    : comm_(comm), n_(n), options_(options), residual_(n, 0.0f), scratch_(kBlock) {}

Fp8Allreduce::~Fp8Allreduce() {
  // A step abandoned mid-exchange: let MPI finish with our buffers before they are freed.
  for (auto& x : slots_) {
    if (x->busy && x->phase > 0) comm_.Wait(x->inner);
  }
}

common::Status Fp8Allreduce::SetResidual(std::vector<float> residual) {
  if (residual.size() != n_) {
    return common::InvalidArgument("fp8 all-reduce residual of " +
                                   std::to_string(residual.size()) + " entries, want " +
                                   std::to_string(n_));
  }
  for (float r : residual) {
    if (!std::isfinite(r)) return common::InvalidArgument("fp8 all-reduce residual not finite");
  }
  residual_ = std::move(residual);
  return common::Status::Ok();
}

Fp8Allreduce::StepCounters Fp8Allreduce::TakeStepCounters() {
  StepCounters out = counters_;
  counters_ = StepCounters{};
  return out;
}

Fp8Allreduce::Exchange& Fp8Allreduce::Get(CollectiveId id) {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size() || !slots_[id]->busy) {
    std::fprintf(stderr, "Fp8Allreduce: exchange %d is not in flight\n", id);
    std::abort();
  }
  return *slots_[id];
}

void Fp8Allreduce::EncodeChunk(float* v, size_t len, size_t chunk_elems, float* res,
                               bool add_residual, uint8_t* record) {
  const bool feedback = options_.error_feedback && res != nullptr;
  const size_t blocks = chunk_elems / kBlock;
  uint8_t* codes = record;
  uint8_t* scales = record + chunk_elems;
  fp8::EncodeCounts counts;
  fp8::Fp8Stats st;
  st.scale_min = INFINITY;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t i0 = b * kBlock;
    const size_t m = i0 < len ? std::min(kBlock, len - i0) : 0;
    float scale = 1.0f;
    if (m > 0) {
      float* x = v + i0;
      if (feedback && add_residual) {
        for (size_t i = 0; i < m; ++i) x[i] += res[i0 + i];
      }
      const float amax = fp8::FiniteAmax(x, m);
      scale = fp8::BlockScale(options_.format, amax);
      fp8::EncodeFp8(options_.format, x, m, codes + i0, 1.0f / scale, &counts);
      if (feedback) {
        fp8::DecodeFp8(options_.format, codes + i0, m, scratch_.data(), scale);
        for (size_t i = 0; i < m; ++i) {
          const float lost = x[i] - scratch_[i];
          // A non-finite gradient entry must not stay in the residual for every later step.
          const float kept = add_residual ? lost : res[i0 + i] + lost;
          res[i0 + i] = std::isfinite(kept) ? kept : 0.0f;
        }
      }
      st.amax = std::max(st.amax, amax);
      st.scale_min = std::min(st.scale_min, scale);
      st.scale_max = std::max(st.scale_max, scale);
      st.elements += static_cast<int64_t>(m);
    }
    if (m < kBlock) std::memset(codes + i0 + m, 0, kBlock - m);
    std::memcpy(scales + b * sizeof(float), &scale, sizeof(float));
  }
  st.saturated = counts.saturated;
  st.underflowed = counts.underflowed;
  st.nan = counts.nan;
  if (st.elements > 0) counters_.stats.Merge(st);
}

CollectiveId Fp8Allreduce::Start(float* data, size_t offset, size_t len) {
  if (offset > n_ || len > n_ - offset) {
    std::fprintf(stderr, "Fp8Allreduce: entries [%zu, %zu) outside the gradient (%zu)\n", offset,
                 offset + len, n_);
    std::abort();
  }
  size_t id = 0;
  while (id < slots_.size() && slots_[id]->busy) ++id;
  if (id == slots_.size()) slots_.push_back(std::make_unique<Exchange>());
  Exchange& x = *slots_[id];
  x.busy = true;
  x.data = data;
  x.offset = offset;
  x.len = len;
  const size_t world = static_cast<size_t>(comm_.world_size());
  if (world == 1 || len == 0) {
    x.phase = 0;
    return static_cast<CollectiveId>(id);
  }
  const size_t blocks = (len + kBlock - 1) / kBlock;
  x.chunk_blocks = (blocks + world - 1) / world;
  x.chunk_elems = x.chunk_blocks * kBlock;
  x.record_bytes = x.chunk_elems + x.chunk_blocks * sizeof(float);
  x.send.resize(world * x.record_bytes);
  x.recv.resize(world * x.record_bytes);
  x.sum.resize(x.chunk_elems);
  for (size_t j = 0; j < world; ++j) {
    const size_t begin = std::min(len, j * x.chunk_elems);
    const size_t end = std::min(len, begin + x.chunk_elems);
    EncodeChunk(data + begin, end - begin, x.chunk_elems, residual_.data() + offset + begin,
                /*add_residual=*/true, x.send.data() + j * x.record_bytes);
  }
  // Both phases send W − 1 records (this rank's own stays home).
  counters_.bytes_sent += 2 * (world - 1) * x.record_bytes;
  counters_.fp32_bytes_equivalent += 2 * (world - 1) * ((len + world - 1) / world) * sizeof(float);
  x.phase = 1;
  x.inner = comm_.StartAlltoallBytes(x.send.data(), x.recv.data(), x.record_bytes);
  in_phase1_.push_back(&x);
  return static_cast<CollectiveId>(id);
}

void Fp8Allreduce::ReduceOwnChunk(Exchange& x) {
  const size_t world = static_cast<size_t>(comm_.world_size());
  const size_t me = static_cast<size_t>(comm_.rank());
  const size_t begin = std::min(x.len, me * x.chunk_elems);
  const size_t mine = std::min(x.len, begin + x.chunk_elems) - begin;
  std::fill(x.sum.begin(), x.sum.end(), 0.0f);
  // Rank order, so the sum does not depend on which record arrived first.
  for (size_t r = 0; r < world; ++r) {
    const uint8_t* record = x.recv.data() + r * x.record_bytes;
    for (size_t i0 = 0; i0 < mine; i0 += kBlock) {
      const size_t m = std::min(kBlock, mine - i0);
      float scale;
      std::memcpy(&scale, record + x.chunk_elems + (i0 / kBlock) * sizeof(float), sizeof(float));
      fp8::DecodeFp8(options_.format, record + i0, m, scratch_.data(), scale);
      float* s = x.sum.data() + i0;
      for (size_t i = 0; i < m; ++i) s[i] += scratch_[i];
    }
  }
  EncodeChunk(x.sum.data(), mine, x.chunk_elems, residual_.data() + x.offset + begin,
              /*add_residual=*/false, x.send.data());
  x.phase = 2;
  x.inner = comm_.StartAllgatherBytes(x.send.data(), x.recv.data(), x.record_bytes);
}

void Fp8Allreduce::DecodeSums(Exchange& x) {
  const size_t world = static_cast<size_t>(comm_.world_size());
  for (size_t r = 0; r < world; ++r) {
    const uint8_t* record = x.recv.data() + r * x.record_bytes;
    const size_t begin = std::min(x.len, r * x.chunk_elems);
    const size_t count = std::min(x.len, begin + x.chunk_elems) - begin;
    for (size_t i0 = 0; i0 < count; i0 += kBlock) {
      float scale;
      std::memcpy(&scale, record + x.chunk_elems + (i0 / kBlock) * sizeof(float), sizeof(float));
      fp8::DecodeFp8(options_.format, record + i0, std::min(kBlock, count - i0),
                     x.data + begin + i0, scale);
    }
  }
}

void Fp8Allreduce::Advance(bool block, const Exchange* until) {
  while (!in_phase1_.empty()) {
    Exchange& x = *in_phase1_.front();
    if (block) {
      comm_.Wait(x.inner);
    } else if (!comm_.Test(x.inner)) {
      return;
    }
    in_phase1_.pop_front();
    ReduceOwnChunk(x);
    if (&x == until) return;
  }
}

bool Fp8Allreduce::Test(CollectiveId id) {
  Exchange& x = Get(id);
  Advance(/*block=*/false, nullptr);
  if (x.phase == 1) return false;
  if (x.phase == 2) {
    if (!comm_.Test(x.inner)) return false;
    DecodeSums(x);
  }
  x.busy = false;
  return true;
}

void Fp8Allreduce::Wait(CollectiveId id) {
  Exchange& x = Get(id);
  if (x.phase == 1) Advance(/*block=*/true, &x);
  if (x.phase == 2) {
    comm_.Wait(x.inner);
    DecodeSums(x);
  }
  x.busy = false;
}

std::vector<float> ResidualForRank(const std::vector<float>& residuals, uint32_t ranks, size_t n,
                                   int rank, int world) {
  std::vector<float> mine(n, 0.0f);
  if (ranks == 0 || residuals.size() != static_cast<size_t>(ranks) * n) return mine;
  if (static_cast<int>(ranks) == world) {
    const auto from = residuals.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(rank) * n);
    std::copy(from, from + static_cast<ptrdiff_t>(n), mine.begin());
  } else if (rank == 0) {
    for (uint32_t r = 0; r < ranks; ++r) {
      const float* src = residuals.data() + static_cast<size_t>(r) * n;
      for (size_t i = 0; i < n; ++i) mine[i] += src[i];
    }
  }
  return mine;
}

}  // namespace engine
