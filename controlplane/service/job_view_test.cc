// AppendJson writes exactly what ToJson(v).dump() writes, for views with every optional part,
// none of them, and strings that need escaping or hold invalid UTF-8.
#include "controlplane/service/job_view.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace controlplane::service {
namespace {

std::string Dumped(const JobView& v) {
  return ToJson(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Appended(const JobView& v) {
  std::string out = "[";  // appends, never replaces
  AppendJson(v, out);
  return out.substr(1);
}

AllocationRecord Placement(int64_t node_id, const std::string& node_name, int ranks) {
  AllocationRecord a;
  a.node_id = node_id;
  a.node_name = node_name;
  a.ranks = ranks;
  return a;
}

JobView Bare() {
  JobView v;
  v.job.id = 7;
  v.job.tenant_id = 2;
  v.job.tenant = "default";
  v.job.name = "train";
  v.job.kind = "command";
  v.job.created_ms = 1'700'000'000'123;
  v.job.updated_ms = 1'700'000'001'000;
  v.job.spec = {{"name", "train"}, {"command", {"true"}}, {"resources", {{"nodes", 1}}}};
  return v;
}

TEST(JobViewJsonTest, ABareJobIsWrittenAsToJsonDumpsIt) {
  const JobView v = Bare();
  EXPECT_EQ(Appended(v), Dumped(v));
  EXPECT_TRUE(nlohmann::json::parse(Appended(v))["exit_code"].is_null());
}

TEST(JobViewJsonTest, EveryOptionalPartIsWrittenAsToJsonDumpsIt) {
  JobView v = Bare();
  v.job.state = api::JobState::kFailed;
  v.job.reason = "exit code 3";
  v.job.exit_code = -3;
  v.job.attempt = 2;
  v.job.priority = 90;
  v.job.started_ms = 1'700'000'000'500;
  v.job.finished_ms = 1'700'000'009'999;
  v.allocation = {Placement(4, "n4", 2), Placement(5, "n5", 1)};
  v.last_step = nlohmann::json{{"step", 5}, {"loss", 0.25}, {"total", nullptr}};
  v.latest_checkpoint = CheckpointRecord{.step = 400, .path = "/ckpt/400", .bytes = 1 << 30};
  v.launch_phases = nlohmann::json{{"placed_ms", 3}, {"started_ms", 40}};
  v.forecast = nlohmann::json{{"wait_s", 1.5}};
  EXPECT_EQ(Appended(v), Dumped(v));
}

TEST(JobViewJsonTest, StringsNeedingEscapesOrHoldingInvalidUtf8AreWrittenAsDumpWritesThem) {
  JobView v = Bare();
  v.job.name = "a \"quoted\" name\\with\ttabs\nand\x01control";
  v.job.reason = "caf\xc3\xa9 \xe2\x9c\x93";  // valid UTF-8, kept as it is
  v.job.tenant = "bad \xff\xfe utf-8 \xc3";   // invalid: replaced as dump() replaces it
  v.allocation = {Placement(1, "n\"1", 1)};
  v.latest_checkpoint = CheckpointRecord{.step = 1, .path = "/p/\x7f\x80", .bytes = 0};
  EXPECT_EQ(Appended(v), Dumped(v));
}

// Random names of every byte: the fast path (plain ASCII) and nlohmann's path agree.
TEST(JobViewJsonTest, RandomBytesInEveryStringAreWrittenAsDumpWritesThem) {
  std::mt19937 rng(31);
  auto text = [&] {
    std::string s(rng() % 12, ' ');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 26);
    return s;
  };
  for (int i = 0; i < 500; ++i) {
    JobView v = Bare();
    v.job.name = text();
    v.job.reason = text();
    v.job.tenant = text();
    v.job.kind = text();
    if (i % 2) v.allocation = {Placement(i, text(), i % 3)};
    if (i % 3) v.latest_checkpoint = CheckpointRecord{.step = i, .path = text(), .bytes = i};
    ASSERT_EQ(Appended(v), Dumped(v)) << i;
  }
}

}  // namespace
}  // namespace controlplane::service
