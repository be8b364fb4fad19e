#include "common/http/route_pattern.h"

#include <regex>

#include <gtest/gtest.h>

namespace common::http {
namespace {

TEST(PatternRegexTest, DerivedFromThePattern) {
  struct Case {
    const char* pattern;
    const char* regex;
  } cases[] = {
      {"/healthz", "/healthz"},
      {"/v1/jobs/{id}", R"(/v1/jobs/(\d+))"},
      {"/v1/jobs/{id}/cancel", R"(/v1/jobs/(\d+)/cancel)"},
      {"/v1/datasets/{name}/shards/{id}", R"(/v1/datasets/([^/]+)/shards/(\d+))"},
      {"/a.b+c", R"(/a\.b\+c)"},
  };
  for (const auto& c : cases) EXPECT_EQ(PatternRegex(c.pattern), c.regex) << c.pattern;
  EXPECT_THROW(PatternRegex("/v1/jobs/{id"), std::invalid_argument);
}

TEST(PatternRegexTest, MatchesWhatThePatternMeansAndNothingElse) {
  const std::regex job(PatternRegex("/v1/jobs/{id}/cancel"));
  EXPECT_TRUE(std::regex_match("/v1/jobs/12/cancel", job));
  for (const char* other : {"/v1/jobs/x/cancel", "/v1/jobs//cancel", "/v1/jobs/12/cancelx",
                            "/v1/jobs/1/2/cancel", "/v1/jobs/-1/cancel"}) {
    EXPECT_FALSE(std::regex_match(other, job)) << other;
  }
  const std::regex named(PatternRegex("/v1/datasets/{name}"));
  EXPECT_TRUE(std::regex_match("/v1/datasets/sim:reach", named));
  EXPECT_FALSE(std::regex_match("/v1/datasets/a/b", named));
  // A '.' in a pattern is a dot, not any character.
  EXPECT_FALSE(std::regex_match("/axb+c", std::regex(PatternRegex("/a.b+c"))));
}

}  // namespace
}  // namespace common::http
