#include "api/job_state.h"

#include <gtest/gtest.h>

namespace api {
namespace {

TEST(JobStateTest, NamesRoundTrip) {
  for (auto s : {JobState::kPending, JobState::kScheduled, JobState::kRunning, JobState::kSucceeded,
                 JobState::kFailed, JobState::kCancelling, JobState::kCancelled,
                 JobState::kRestarting}) {
    auto p = ParseJobState(JobStateName(s));
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(*p, s);
  }
  EXPECT_FALSE(ParseJobState("running").has_value());
}

TEST(JobStateTest, HappyPath) {
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kScheduled));
  EXPECT_TRUE(CanTransition(JobState::kScheduled, JobState::kRunning));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kSucceeded));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kFailed));
}

TEST(JobStateTest, Cancel) {
  EXPECT_TRUE(CanTransition(JobState::kPending, JobState::kCancelled));
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kCancelling));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kCancelling));
  EXPECT_TRUE(CanTransition(JobState::kCancelling, JobState::kCancelled));
  EXPECT_FALSE(CanTransition(JobState::kCancelling, JobState::kSucceeded));
  // A preempted job still stopping is cancelled like a running one.
  EXPECT_TRUE(CanTransition(JobState::kRestarting, JobState::kCancelling));
}

TEST(JobStateTest, TerminalStatesAreFinal) {
  for (auto t : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    EXPECT_TRUE(IsTerminal(t));
    for (auto to : {JobState::kPending, JobState::kRunning, JobState::kCancelled, JobState::kFailed})
      EXPECT_FALSE(CanTransition(t, to));
  }
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_FALSE(CanTransition(JobState::kPending, JobState::kRunning));
  EXPECT_TRUE(CanTransition(JobState::kRunning, JobState::kRestarting));
  EXPECT_TRUE(CanTransition(JobState::kRestarting, JobState::kPending));
  EXPECT_TRUE(CanTransition(JobState::kRestarting, JobState::kSucceeded));
}

}  // namespace
}  // namespace api
