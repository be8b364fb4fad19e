// Fp8Allreduce: the gradient all-reduce with FP8 on the wire and error feedback (docs/fp8.md,
// "FP8 gradient all-reduce"). GradBuckets uses it in place of an fp32 MPI_Iallreduce when
// engine.fp8.allreduce is on; every rank still ends with bitwise the same sums.
//
// One bucket of len floats, on W ranks, in two nonblocking phases:
//   1. Each rank adds its residual to the bucket (error feedback), quantises it in 1 × 128 blocks
//      (fp32 scale = block amax / format max, engine/fp8/block_quant.h rules), keeps what the
//      quantisation lost as its new residual, and sends chunk j (ceil(blocks / W) blocks: codes,
//      then scales) to rank j: MPI_Ialltoall of fp8.
//   2. Rank j dequantises the W copies of its chunk, sums them in fp32 in rank order, quantises
//      the sum again (adding what that loses to its own residual, so it too is fed back next
//      step), and every rank receives every owner's quantised sum: MPI_Iallgather of fp8. Each
//      rank dequantises the same bytes, so the sums are bitwise identical everywhere.
//
// Why reduce-scatter + all-gather and not an all-gather of every rank's fp8 gradient: each rank
// sends 2 (W−1)/W · (1 + 4/128) bytes per gradient entry, against 2 (W−1)/W · 4 for the
// bandwidth-optimal fp32 all-reduce: 0.258x for any W. An all-gather of fp8 sends (W−1) · 1.03
// bytes per entry: equal at W = 2 but 0.52x at W = 4 and no saving past W = 8, and every rank
// would spend W dequantisations per entry instead of 2. The price is the second quantisation
// (of the sum), which the owner's residual feeds back like the first.
//
// Order: every rank starts exchanges in the same order (Start), and phase 2 of an exchange
// starts only after phase 2 of every exchange started before it, so the all-gathers too start in
// the same order everywhere, whatever order the caller tests or waits in.
//
// Residuals live in the units GradBuckets hands over (gradients times this rank's loss weight),
// one fp32 per gradient entry, indexed like the gradient buffer; a checkpoint stores every rank's
// (engine/format/checkpoint.h) so a resumed run continues exactly. With error_feedback false
// residuals are neither added nor kept (a test and benchmark baseline only).
//
// Bytes: bytes_sent counts what this rank hands MPI for other ranks (its own chunk stays home);
// fp32_bytes_equivalent counts what the same reduce-scatter + all-gather would send in fp32,
// which is what MPI's ring and Rabenseifner all-reduces send for large buffers.
//
// World size 1 has nothing to exchange: Start returns at once and leaves the bucket untouched
// (fp32, no residual). Not thread-safe; call from the thread that runs the collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/fp8/block_quant.h"

namespace engine {

struct Fp8AllreduceOptions {
  // E4M3 (3 mantissa bits) by default: block scaling makes E5M2's range unnecessary and its 2
  // mantissa bits double the error (docs/fp8.md has the measurement).
  fp8::Format format = fp8::Format::kE4M3;
  bool error_feedback = true;
};

class Fp8Allreduce {
 public:
  // n: entries of the gradient buffer the buckets come from (the residual's length).
  Fp8Allreduce(Communicator& comm, size_t n, Fp8AllreduceOptions options = {});
  ~Fp8Allreduce();  // waits for exchanges still in flight
  Fp8Allreduce(const Fp8Allreduce&) = delete;
  Fp8Allreduce& operator=(const Fp8Allreduce&) = delete;

  // Starts the sum over ranks of data[0, len), which is gradient entries [offset, offset + len).
  // data must stay untouched until Test returns true or Wait returns; it then holds the sum.
  CollectiveId Start(float* data, size_t offset, size_t len);
  bool Test(CollectiveId id);
  void Wait(CollectiveId id);

  // Accumulated since the last TakeStepCounters: what quantising did, and bytes on the wire.
  struct StepCounters {
    fp8::Fp8Stats stats;
    uint64_t bytes_sent = 0;
    uint64_t fp32_bytes_equivalent = 0;
  };
  StepCounters TakeStepCounters();

  // This rank's residual, n floats (zeros until the first exchange).
  const std::vector<float>& residual() const { return residual_; }
  // Restores a residual (from a checkpoint): n floats, all finite.
  common::Status SetResidual(std::vector<float> residual);

 private:
  struct Exchange;
  Exchange& Get(CollectiveId id);
  // Starts phase 2 of the oldest exchanges whose phase 1 has completed, in start order; with
  // block, waits for phase 1 up to and including exchange `until`.
  void Advance(bool block, const Exchange* until);
  // Phase 1 done: reduce this rank's chunk, start phase 2.
  void ReduceOwnChunk(Exchange& x);
  // Phase 2 done: decode every owner's sums into the caller's buffer.
  void DecodeSums(Exchange& x);
  // Quantises v[0, len) (len ≤ chunk_elems) into one chunk record (codes, then block scales).
  // Phase 1 (add_residual): v += res first and res := v − dequantised. Phase 2: res += v −
  // dequantised. Without error feedback res is ignored.
  void EncodeChunk(float* v, size_t len, size_t chunk_elems, float* res, bool add_residual,
                   uint8_t* record);

  Communicator& comm_;
  size_t n_;
  Fp8AllreduceOptions options_;
  std::vector<float> residual_;
  std::vector<std::unique_ptr<Exchange>> slots_;  // indexed by CollectiveId; reused once idle
  std::deque<Exchange*> in_phase1_;  // start order
  std::vector<float> scratch_;       // one decoded block
  StepCounters counters_;
};

// The residual rank `rank` of `world` resumes with, from a checkpoint's residuals of `ranks`
// ranks (rank-major, n each; engine/format/checkpoint.h): its own when the rank count is the
// same; on another count, the sum of all of them on rank 0 and zeros elsewhere (what the ranks owe in
// total is kept); zeros when the checkpoint has none.
std::vector<float> ResidualForRank(const std::vector<float>& residuals, uint32_t ranks, size_t n,
                                   int rank, int world);

}  // namespace engine
