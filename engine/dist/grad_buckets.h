// GradBuckets: the data-parallel gradient all-reduce, bucketed and overlapped with backward, and
// weighted by the global token count.
//
// The flat gradient buffer (n floats) is cut into buckets of about bucket_bytes in reverse
// parameter order: bucket 0 holds the last parameters, whose gradients backward finishes first.
// Backward reports ranges of gradient entries as they become final (MarkReady, typically once per
// layer); when every entry of the next bucket is final, the bucket is scaled and its nonblocking
// all-reduce starts while backward goes on with earlier layers.
//
// Weighting. Rank r's model writes the gradient of its local mean loss over its w_r loss-weighted
// tokens (real tokens). The global per-token mean loss over all ranks is L = Σ_r w_r L_r / W with
// W = Σ_r w_r, so its gradient is Σ_r w_r g_r / W. Each bucket is therefore multiplied by w_r
// before its sum over ranks, and divided by W afterwards; W (and Σ w_r L_r, for reporting) is
// summed by one small all-reduce started first, in Begin. Ranks holding different numbers of real
// tokens thus produce the exact gradient of the global per-token mean. The arithmetic, for anyone
// reproducing it bit for bit: g := fl(g * float(w_r)); g := Σ_r g (MPI, float); g := fl(g *
// float(1.0 / W)). A rank with w_r == 0 contributes zeros whatever its buffer holds; W == 0 (no
// real tokens anywhere) gives zero gradients and loss.
//
// Progress. MPI nonblocking collectives advance only inside MPI calls (Open MPI has no
// asynchronous progress thread for them), so every MarkReady and Poll also tests the collectives
// in flight; backward calling MarkReady between layers is what makes the communication overlap
// the compute. Buckets always start in index order, whatever order ranges are marked in, so all
// ranks start the same collectives in the same order.
//
// FP8 on the wire: with options.fp8 set, each bucket's sum over ranks runs through that
// Fp8Allreduce (fp8 codes and block scales, error feedback; engine/dist/fp8_allreduce.h) instead
// of an fp32 MPI_Iallreduce; the weighting and scaling around it are the same.
//
// Use per step: Begin → MarkReady... (from backward) → Finish. The gradient buffer must not be
// touched between a bucket's launch and Finish except by backward writing other, not yet marked
// entries. Not thread-safe: call from the thread that runs backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/dist/fp8_allreduce.h"

namespace engine {

struct GradBucketOptions {
  size_t bucket_bytes = size_t{2} << 20;  // 2 MiB of float32 gradients per bucket
  // Not owned; null: fp32 all-reduce. Its n must be the gradient buffer's.
  Fp8Allreduce* fp8 = nullptr;
};

// What Finish returns: the global loss-weight sum W and the global per-token mean loss.
// Also what this rank sent for the gradient exchange: wire_bytes is what it handed the network
// (fp8: counted by Fp8Allreduce; fp32: 2 (W−1)/W · 4 bytes per entry, what the bandwidth-optimal
// all-reduce sends), wire_bytes_fp32 what an fp32 all-reduce would have sent; both 0 on one rank.
struct GlobalStepTotals {
  double weight = 0.0;
  double loss = 0.0;
  uint64_t wire_bytes = 0;
  uint64_t wire_bytes_fp32 = 0;
  fp8::Fp8Stats fp8;  // what FP8 quantising did this step (elements 0 without FP8)
};

class GradBuckets {
 public:
  // grads: the model's flat gradient buffer (n floats); its address and size stay fixed.
  GradBuckets(Communicator& comm, float* grads, size_t n, GradBucketOptions options = {});
  // Waits for anything still in flight (a step abandoned between Begin and Finish).
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Starts a step: local_weight is this rank's loss-weight sum w_r (real tokens, ≥ 0), local_loss
  // its mean loss over them. Starts the all-reduce of (w_r, w_r * local_loss).
  void Begin(double local_weight, double local_loss);
  // Gradient entries [begin, end) are final for this step. Ranges of one step must not overlap;
  // they may come in any order. Starts every bucket that became complete (in bucket order).
  void MarkReady(size_t begin, size_t end);
  // Drives MPI progress without marking anything (for long stretches of compute between marks).
  void Poll();
  // The callback to hand to a model's backward: calls MarkReady.
  std::function<void(size_t, size_t)> ReadyCallback() {
    return [this](size_t begin, size_t end) { MarkReady(begin, end); };
  }
  // Marks whatever was not marked as ready (a model without per-layer callbacks just calls
  // Finish after backward), waits for every bucket and scales by 1/W. After it the gradient
  // buffer holds the gradient of the global per-token mean loss, identical on every rank.
  GlobalStepTotals Finish();

  size_t num_buckets() const { return buckets_.size(); }
  // Bucket k covers gradient entries [begin, end).
  size_t bucket_begin(size_t k) const { return buckets_[k].begin; }
  size_t bucket_end(size_t k) const { return buckets_[k].end; }
  // Buckets whose all-reduce had completed before Finish was called, in the last step: a measure
  // of how much communication overlapped backward.
  size_t completed_before_finish() const { return completed_before_finish_; }

 private:
  struct Bucket {
    size_t begin = 0, end = 0;
    size_t marked = 0;  // entries marked ready this step
    CollectiveId id = -1;
    bool launched = false, done = false;
  };
  void LaunchReady();
  void TestInFlight();

  CollectiveId StartSum(float* g, size_t begin, size_t len);
  bool TestSum(CollectiveId id);
  void WaitSum(CollectiveId id);

  Communicator& comm_;
  Fp8Allreduce* fp8_;
  uint64_t fp32_wire_bytes_ = 0;  // this step's, for the fp32 path
  float* grads_;
  size_t n_;
  std::vector<Bucket> buckets_;
  size_t bucket_elems_ = 0;
  size_t next_launch_ = 0;  // first bucket not launched yet
  size_t next_done_ = 0;    // first bucket not known to be complete
  bool in_step_ = false;
  float local_weight_ = 0.0f;
  double totals_[2] = {0.0, 0.0};  // (w_r, w_r * loss_r), summed in place
  CollectiveId totals_id_ = -1;
  size_t completed_before_finish_ = 0;
};

}  // namespace engine
