#include "engine/data/loader.h"

#include <chrono>
#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace engine::data {
namespace {

PlanConfig Config(int rank = 0, int world = 1) {
  PlanConfig c;
  c.seed = 11;
  c.samples_per_step = 40;
  c.rank = rank;
  c.world = world;
  c.tokens_per_row = 512;
  return c;
}

// A batch that records which plan filled it.
struct FakeBatch {
  int64_t step = -1;
  uint64_t first = 0;
  int fills = 0;
};

Loader<FakeBatch>::Fill RecordFill(int sleep_ms = 0) {
  return [sleep_ms](const PackedPlan& p, FakeBatch* b) {
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    b->step = p.step;
    b->first = p.local_begin;
    ++b->fills;
    return common::Status::Ok();
  };
}

TEST(MakePlanTest, DeterministicAndValid) {
  auto a = MakePlan(Config(), 3, 120);
  auto b = MakePlan(Config(), 3, 120);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  EXPECT_EQ(a->global_begin, 120u);
  EXPECT_EQ(a->global_end, 160u);
  EXPECT_EQ(a->num_samples(), 40);
  EXPECT_EQ(a->lengths, b->lengths);
  EXPECT_EQ(a->sample_seeds, b->sample_seeds);
  EXPECT_EQ(a->rows.sample_index, b->rows.sample_index);
  EXPECT_EQ(a->rows.cu_seqlens, b->rows.cu_seqlens);
  EXPECT_TRUE(ValidatePacking(a->rows, a->lengths).ok());
  int64_t tokens = 0;
  for (int32_t len : a->lengths) tokens += len;
  EXPECT_EQ(a->real_tokens(), tokens);
  // Another seed draws other samples.
  PlanConfig other = Config();
  other.seed = 12;
  EXPECT_NE(MakePlan(other, 3, 120)->lengths, a->lengths);
  // Action tokens lengthen every sample; the compositions stay the same.
  PlanConfig with_actions = Config();
  with_actions.action_tokens = 16;
  auto c = MakePlan(with_actions, 3, 120);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < c->num_samples(); ++i) {
    EXPECT_EQ(c->lengths[i], a->lengths[i] + 16);
    EXPECT_EQ(c->compositions[i].NumTokens(), a->compositions[i].NumTokens());
  }
  EXPECT_TRUE(ValidatePacking(c->rows, c->lengths).ok());
}

TEST(MakePlanTest, SampleDependsOnlyOnGlobalIndexNotOnRankSplit) {
  // One rank's plan over [0, 40) vs three ranks' plans: same seeds and lengths per global index.
  auto whole = MakePlan(Config(0, 1), 0, 0);
  ASSERT_TRUE(whole.ok());
  std::set<uint64_t> seen;
  for (int r = 0; r < 3; ++r) {
    auto part = MakePlan(Config(r, 3), 0, 0);
    ASSERT_TRUE(part.ok());
    EXPECT_GE(part->num_samples(), 13);  // 40 = 13 + 13 + 14: uneven split
    EXPECT_LE(part->num_samples(), 14);
    for (int i = 0; i < part->num_samples(); ++i) {
      const uint64_t id = part->SampleId(i);
      EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " on two ranks";
      EXPECT_EQ(part->sample_seeds[i], whole->sample_seeds[id]);
      EXPECT_EQ(part->lengths[i], whole->lengths[id]);
    }
  }
  EXPECT_EQ(seen.size(), 40u);
}

TEST(MakePlanTest, RejectsBadConfig) {
  PlanConfig c = Config(0, 2);
  c.samples_per_step = 1;
  EXPECT_FALSE(MakePlan(c, 0, 0).ok());
  c = Config();
  c.tokens_per_row = 100;  // below the longest sample (285)
  EXPECT_FALSE(MakePlan(c, 0, 0).ok());
  c = Config();
  c.tokens_per_row = 290;
  EXPECT_TRUE(MakePlan(c, 0, 0).ok());
  c.action_tokens = 16;  // 285 + 16 > 290
  EXPECT_FALSE(MakePlan(c, 0, 0).ok());
  EXPECT_FALSE(MakePlan(Config(2, 2), 0, 0).ok());
}

TEST(LoaderTest, DeliversPlansInStepOrderFromAnyStartingPosition) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.first_step = 5;
  o.first_sample = 200;
  o.num_steps = 6;
  o.prefetch = 2;
  Loader<FakeBatch> loader(o, RecordFill());
  for (int k = 0; k < 6; ++k) {
    auto item = loader.Next();
    ASSERT_TRUE(item.ok()) << item.status().ToString();
    auto want = MakePlan(o.plan, 5 + k, 200 + 40 * k);
    EXPECT_EQ(item->plan.step, 5 + k);
    EXPECT_EQ(item->plan.global_begin, 200u + 40 * k);
    EXPECT_EQ(item->plan.lengths, want->lengths);
    EXPECT_EQ(item->plan.rows.cu_seqlens, want->rows.cu_seqlens);
    EXPECT_EQ(item->batch->step, 5 + k);
  }
  auto end = loader.Next();
  EXPECT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), common::Code::kFailedPrecondition);
}

TEST(LoaderTest, FastProducerNeverBlocksTheConsumerAndStaysBounded) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.num_steps = 30;
  o.prefetch = 3;
  Loader<FakeBatch> loader(o, RecordFill());
  // Let the producer fill the queue, then consume slower than it produces.
  for (int i = 0; i < 200 && loader.queued() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(loader.queued(), 3u);
  EXPECT_EQ(loader.produced(), 3);  // bounded: never more than prefetch ahead
  const double wait_before = loader.data_wait_seconds();
  int empty_at_call = 0;
  for (int k = 0; k < 20; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));  // the "training step"
    if (loader.queued() == 0) ++empty_at_call;
    EXPECT_LE(loader.produced(), k + 3);
    auto item = loader.Next();
    ASSERT_TRUE(item.ok());
    EXPECT_EQ(item->plan.step, k);
    loader.Recycle(std::move(item->batch));
  }
  EXPECT_EQ(empty_at_call, 0);
  // Nothing but lock handoffs: well under a millisecond per step even on a loaded machine.
  EXPECT_LT(loader.data_wait_seconds() - wait_before, 0.02);
}

TEST(LoaderTest, SlowProducerIsReportedAsDataWait) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.num_steps = 4;
  Loader<FakeBatch> loader(o, RecordFill(/*sleep_ms=*/25));
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(loader.Next().ok());
  EXPECT_GT(loader.data_wait_seconds(), 0.05);
}

TEST(LoaderTest, RecycledBatchesAreReused) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.num_steps = 10;
  o.prefetch = 1;
  Loader<FakeBatch> loader(o, RecordFill());
  int max_fills = 0;
  for (int k = 0; k < 10; ++k) {
    auto item = loader.Next();
    ASSERT_TRUE(item.ok());
    max_fills = std::max(max_fills, item->batch->fills);
    loader.Recycle(std::move(item->batch));
  }
  EXPECT_GT(max_fills, 1);  // at most prefetch + 2 batches ever exist, so some were refilled
}

TEST(LoaderTest, FillErrorIsDeliveredInOrder) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.num_steps = 10;
  Loader<FakeBatch> loader(o, [](const PackedPlan& p, FakeBatch* b) {
    if (p.step == 2) return common::Internal("episode shard unreadable");
    b->step = p.step;
    return common::Status::Ok();
  });
  EXPECT_TRUE(loader.Next().ok());
  EXPECT_TRUE(loader.Next().ok());
  auto third = loader.Next();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().message(), "episode shard unreadable");
  EXPECT_FALSE(loader.Next().ok());
}

TEST(LoaderTest, ShutdownIsCleanWithFullQueueOrFillInProgress) {
  Loader<FakeBatch>::Options o;
  o.plan = Config();
  o.num_steps = -1;  // unbounded
  o.prefetch = 2;
  {
    Loader<FakeBatch> loader(o, RecordFill());
    for (int i = 0; i < 200 && loader.queued() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(loader.queued(), 2u);  // producer now blocked on a full queue
  }                                  // destructor wakes and joins it
  const auto t0 = std::chrono::steady_clock::now();
  {
    Loader<FakeBatch> loader(o, RecordFill(/*sleep_ms=*/50));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // inside the first fill
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);  // the fill in progress finishes, no further one starts
}

}  // namespace
}  // namespace engine::data
