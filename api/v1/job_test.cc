#include "api/v1/job.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

namespace api::v1 {
namespace {

using nlohmann::json;

std::string Dumped(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Appended(const Job& j) {
  std::string out = "[";  // appends, never replaces
  AppendJson(j, out);
  return out.substr(1);
}

Job Bare() {
  Job j;
  j.id = 7;
  j.tenant_id = 2;
  j.tenant = "default";
  j.name = "train";
  j.kind = "command";
  j.state = "PENDING";
  j.created_ms = 1'700'000'000'123;
  j.updated_ms = 1'700'000'001'000;
  j.spec = {{"name", "train"}, {"command", {"true"}}, {"resources", {{"nodes", 1}}}};
  return j;
}

Job Full() {
  Job j = Bare();
  j.state = "FAILED";
  j.reason = "exit code 3";
  j.exit_code = -3;
  j.attempt = 2;
  j.priority = 90;
  j.started_ms = 1'700'000'000'500;
  j.finished_ms = 1'700'000'009'999;
  j.wait_seconds = 0.377;
  j.allocation = {{4, "n4", 2}, {5, "n5", 1}};
  j.last_step = json{{"step", 5}, {"loss", 0.25}, {"total", nullptr}};
  j.latest_checkpoint = JobCheckpoint{"/ckpt/400", 400, int64_t{1} << 40};
  j.launch_phases = json{{"attempt", 2}, {"total_ms", nullptr}};
  j.forecast = json{{"wait_s", 1.5}};
  j.pipeline = json{{"id", 3}, {"name", "p"}, {"step", "train"}, {"attempt", 1}};
  return j;
}

TEST(JobViewTest, WritesTheFieldsOfTheJobSchemaAndNullsForWhatIsNotKnownYet) {
  const json j = ToJson(Bare());
  for (const char* key :
       {"id", "tenant_id", "tenant", "name", "kind", "state", "reason", "priority", "spec",
        "attempt", "exit_code", "created_at", "updated_at", "started_at", "finished_at",
        "wait_seconds", "allocation", "last_step", "latest_checkpoint"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 19u) << j.dump();  // the single job's documents are left out
  EXPECT_EQ(j["created_at"], "2023-11-14T22:13:20.123Z");
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_TRUE(j["started_at"].is_null());
  EXPECT_TRUE(j["wait_seconds"].is_null());
  EXPECT_EQ(ToJson(Full())["wait_seconds"], 0.377);
  EXPECT_TRUE(j["last_step"].is_null());
  EXPECT_TRUE(j["latest_checkpoint"].is_null());
  EXPECT_EQ(ToJson(Full())["allocation"][1], json({{"node_id", 5}, {"node", "n5"}, {"ranks", 1}}));
}

TEST(JobViewTest, RoundTripsBareAndFullJobsAndAPage) {
  for (const Job& job : {Bare(), Full()}) {
    auto back = ParseJob(ToJson(job));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, job);
  }
  JobList page{{Full(), Bare()}, "7"};
  auto back = ParseJobList(ToJson(page));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, page);
  page.next_cursor.reset();
  EXPECT_TRUE(ToJson(page)["next_cursor"].is_null());
  EXPECT_EQ(*ParseJobList(ToJson(page)), page);
}

TEST(JobViewTest, ADocumentThatIsNullStaysNull) {
  Job j = Bare();
  j.launch_phases = json(nullptr);
  const json written = ToJson(j);
  ASSERT_TRUE(written.contains("launch_phases"));
  EXPECT_TRUE(written["launch_phases"].is_null());
  auto back = ParseJob(written);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, j);
  EXPECT_EQ(Appended(j), Dumped(written));
}

TEST(JobViewTest, RefusesMissingAndMistypedFieldsNamingThem) {
  json j = ToJson(Full());
  j.erase("state");
  EXPECT_EQ(ParseJob(j).status().field(), "state");

  j = ToJson(Full());
  j["allocation"][1]["ranks"] = "two";
  auto bad = ParseJobList(json{{"jobs", {ToJson(Bare()), j}}, {"next_cursor", nullptr}});
  EXPECT_EQ(bad.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(bad.status().field(), "jobs[1].allocation[1].ranks");

  j = ToJson(Full());
  j["latest_checkpoint"].erase("path");
  EXPECT_EQ(ParseJob(j).status().field(), "latest_checkpoint.path");

  j = ToJson(Full());
  j["launch_phases"] = "soon";
  EXPECT_EQ(ParseJob(j).status().field(), "launch_phases");

  j = ToJson(Full());
  j["wait_seconds"] = "0.4";
  EXPECT_EQ(ParseJob(j).status().field(), "wait_seconds");
  j.erase("wait_seconds");
  EXPECT_EQ(ParseJob(j).status().field(), "wait_seconds");

  j = ToJson(Full());
  j["started_at"] = "yesterday";
  EXPECT_EQ(ParseJob(j).status().field(), "started_at");

  EXPECT_FALSE(ParseJob(json::array()).ok());
}

TEST(JobViewTest, AppendJsonWritesWhatToJsonDumpsForBareAndFullJobs) {
  EXPECT_EQ(Appended(Bare()), Dumped(ToJson(Bare())));
  EXPECT_EQ(Appended(Full()), Dumped(ToJson(Full())));
  Job only_some = Full();
  only_some.forecast.reset();
  only_some.latest_checkpoint.reset();
  only_some.exit_code.reset();
  EXPECT_EQ(Appended(only_some), Dumped(ToJson(only_some)));
}

TEST(JobViewTest, AppendJsonWritesEscapesAndInvalidUtf8AsDumpDoes) {
  Job j = Full();
  j.name = "a \"quoted\" name\\with\ttabs\nand\x01control";
  j.reason = "caf\xc3\xa9 \xe2\x9c\x93";  // valid UTF-8, kept as it is
  j.tenant = "bad \xff\xfe utf-8 \xc3";   // invalid: replaced as dump() replaces it
  j.allocation = {{1, "n\"1", 1}};
  j.latest_checkpoint = JobCheckpoint{"/p/\x7f\x80", 1, 0};
  j.spec["name"] = "\xe6\x97\xa5\xe6\x9c\xac \xff";
  EXPECT_EQ(Appended(j), Dumped(ToJson(j)));
}

// Random strings of every byte in every string field, and each optional part present or not.
TEST(JobViewTest, AppendJsonWritesWhatToJsonDumpsForRandomJobs) {
  std::mt19937 rng(31);
  auto text = [&] {
    std::string s(rng() % 12, ' ');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 'a' + rng() % 26);
    return s;
  };
  JobList page;
  for (int i = 0; i < 500; ++i) {
    Job j = rng() % 2 ? Full() : Bare();
    j.name = text();
    j.reason = text();
    j.tenant = text();
    j.kind = text();
    j.state = text();
    j.id = static_cast<int64_t>(rng()) * (rng() % 2 ? 1 : -1);
    if (rng() % 2) j.allocation = {{i, text(), i % 3}};
    if (rng() % 2) j.latest_checkpoint = JobCheckpoint{text(), i, i};
    if (rng() % 2) j.last_step = json{{text(), text()}};
    if (rng() % 2) j.exit_code = static_cast<int>(rng() % 512) - 256;
    if (rng() % 3 == 0) j.launch_phases = json(nullptr);
    // Whole seconds, milliseconds, and doubles of every size: dump()'s number format.
    if (rng() % 2) j.wait_seconds = static_cast<double>(rng() % 10'000'000) / 1000.0;
    if (rng() % 5 == 0) j.wait_seconds = std::ldexp(static_cast<double>(rng()), i % 80 - 40);
    ASSERT_EQ(Appended(j), Dumped(ToJson(j))) << i;
    page.jobs.push_back(std::move(j));
  }
  page.next_cursor = text();
  std::string out;
  AppendJson(page, out);
  EXPECT_EQ(out, Dumped(ToJson(page)));
  page.jobs.clear();
  page.next_cursor.reset();
  out.clear();
  AppendJson(page, out);
  EXPECT_EQ(out, R"({"jobs":[],"next_cursor":null})");
}

TEST(EventViewTest, RoundTripsAndRefusesMistypedFields) {
  EventList l{{{11, 1'700'000'000'000, "state", json{{"state", "RUNNING"}}},
               {12, 1'700'000'000'250, "step", json{{"step", 3}, {"loss", 0.5}}}}};
  const json written = ToJson(l);
  EXPECT_EQ(
      written["events"][0].dump(),
      R"({"data":{"state":"RUNNING"},"id":11,"time":"2023-11-14T22:13:20.000Z","type":"state"})");
  auto back = ParseEventList(written);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, l);
  EXPECT_EQ(*ParseEvent(ToJson(l.events[1])), l.events[1]);

  json bad = written;
  bad["events"][1]["data"] = json::array();
  EXPECT_EQ(ParseEventList(bad).status().field(), "events[1].data");
  bad = written;
  bad["events"][0].erase("time");
  EXPECT_EQ(ParseEventList(bad).status().field(), "events[0].time");
}

}  // namespace
}  // namespace api::v1
