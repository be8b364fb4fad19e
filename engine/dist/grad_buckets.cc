#include "engine/dist/grad_buckets.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace engine {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "GradBuckets: %s\n", what);
  std::abort();
}

}  // namespace

GradBuckets::GradBuckets(Communicator& comm, float* grads, size_t n, GradBucketOptions options)
    : comm_(comm), fp8_(options.fp8), grads_(grads), n_(n) {
  bucket_elems_ = std::max<size_t>(1, options.bucket_bytes / sizeof(float));
  // Reverse parameter order: bucket 0 ends at n.
  for (size_t end = n; end > 0;) {
    const size_t begin = end > bucket_elems_ ? end - bucket_elems_ : 0;
    Bucket b;
    b.begin = begin;
    b.end = end;
    buckets_.push_back(b);
    end = begin;
  }
}

GradBuckets::~GradBuckets() {
  if (!in_step_) return;
  if (totals_id_ >= 0) comm_.Wait(totals_id_);
  for (Bucket& b : buckets_) {
    if (b.launched && !b.done) WaitSum(b.id);
  }
}

CollectiveId GradBuckets::StartSum(float* g, size_t begin, size_t len) {
  if (fp8_ != nullptr) return fp8_->Start(g, begin, len);
  const uint64_t w = static_cast<uint64_t>(comm_.world_size());
  fp32_wire_bytes_ += 2 * (w - 1) * ((len + w - 1) / w) * sizeof(float);
  return comm_.StartAllreduceSum(g, len);
}

bool GradBuckets::TestSum(CollectiveId id) {
  return fp8_ != nullptr ? fp8_->Test(id) : comm_.Test(id);
}

void GradBuckets::WaitSum(CollectiveId id) {
  if (fp8_ != nullptr) {
    fp8_->Wait(id);
  } else {
    comm_.Wait(id);
  }
}

void GradBuckets::Begin(double local_weight, double local_loss) {
  if (in_step_) Die("Begin called twice without Finish");
  if (!(local_weight >= 0.0)) Die("local weight must be >= 0");
  in_step_ = true;
  for (Bucket& b : buckets_) {
    b.marked = 0;
    b.id = -1;
    b.launched = b.done = false;
  }
  next_launch_ = next_done_ = 0;
  completed_before_finish_ = 0;
  fp32_wire_bytes_ = 0;
  if (fp8_ != nullptr) fp8_->TakeStepCounters();  // nothing from an abandoned step carries over
  local_weight_ = static_cast<float>(local_weight);
  totals_[0] = local_weight;
  // A rank without real tokens contributes nothing, even if its loss is 0/0.
  totals_[1] = local_weight > 0.0 ? local_weight * local_loss : 0.0;
  totals_id_ = comm_.StartAllreduceSum(totals_, 2);
}

void GradBuckets::MarkReady(size_t begin, size_t end) {
  if (!in_step_) Die("MarkReady outside Begin/Finish");
  if (begin > end || end > n_) Die("MarkReady range outside the gradient buffer");
  if (begin == end) return;
  // Entries [begin, end) touch buckets from the one holding end-1 down to the one holding begin.
  const size_t first = (n_ - end) / bucket_elems_;
  const size_t last = (n_ - 1 - begin) / bucket_elems_;
  for (size_t k = first; k <= last; ++k) {
    Bucket& b = buckets_[k];
    const size_t overlap = std::min(end, b.end) - std::max(begin, b.begin);
    b.marked += overlap;
    if (b.marked > b.end - b.begin) Die("gradient range marked ready twice in one step");
  }
  LaunchReady();
  TestInFlight();
}

void GradBuckets::Poll() {
  if (in_step_) TestInFlight();
}

void GradBuckets::LaunchReady() {
  while (next_launch_ < buckets_.size()) {
    Bucket& b = buckets_[next_launch_];
    if (b.marked != b.end - b.begin) break;
    float* g = grads_ + b.begin;
    const size_t len = b.end - b.begin;
    if (local_weight_ > 0.0f) {
      for (size_t i = 0; i < len; ++i) g[i] *= local_weight_;
    } else {
      std::fill(g, g + len, 0.0f);  // 0 × NaN would still be NaN
    }
    b.id = StartSum(g, b.begin, len);
    b.launched = true;
    ++next_launch_;
  }
}

void GradBuckets::TestInFlight() {
  // One MPI_Test runs Open MPI's progress engine for every outstanding request; testing in order
  // and stopping at the first unfinished one keeps this O(1) per call in the common case.
  while (next_done_ < next_launch_) {
    Bucket& b = buckets_[next_done_];
    if (!TestSum(b.id)) break;
    b.done = true;
    ++next_done_;
  }
}

GlobalStepTotals GradBuckets::Finish() {
  if (!in_step_) Die("Finish without Begin");
  completed_before_finish_ = next_done_;
  for (Bucket& b : buckets_) b.marked = b.end - b.begin;  // whatever was not marked is final now
  LaunchReady();
  comm_.Wait(totals_id_);
  totals_id_ = -1;
  GlobalStepTotals t;
  t.weight = totals_[0];
  t.loss = t.weight > 0.0 ? totals_[1] / t.weight : 0.0;
  const float scale = t.weight > 0.0 ? static_cast<float>(1.0 / t.weight) : 0.0f;
  for (Bucket& b : buckets_) {
    if (!b.done) WaitSum(b.id);
    b.done = true;
    float* g = grads_ + b.begin;
    const size_t len = b.end - b.begin;
    for (size_t i = 0; i < len; ++i) g[i] *= scale;
  }
  if (fp8_ != nullptr) {
    Fp8Allreduce::StepCounters c = fp8_->TakeStepCounters();
    t.wire_bytes = c.bytes_sent;
    t.wire_bytes_fp32 = c.fp32_bytes_equivalent;
    t.fp8 = c.stats;
  } else {
    t.wire_bytes = t.wire_bytes_fp32 = fp32_wire_bytes_;
  }
  in_step_ = false;
  return t;
}

}  // namespace engine
