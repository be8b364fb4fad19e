#include "cli/job_format.h"

#include <gtest/gtest.h>

#include "cli/format.h"

namespace cli {
namespace {

using nlohmann::json;

api::v1::Job Job(int64_t id, const std::string& name, const std::string& state) {
  api::v1::Job j;
  j.id = id;
  j.tenant = "default";
  j.name = name;
  j.kind = "train";
  j.state = state;
  j.created_ms = 1'767'322'800'000;  // 2026-01-02T03:00:00Z
  j.updated_ms = j.created_ms;
  j.spec = {{"name", name}};
  return j;
}

TEST(JobFormatTest, JobsTableShowsEachJobsStepAndReason) {
  api::v1::JobList page;
  page.jobs.push_back(Job(9, "reach-bc", "RUNNING"));
  page.jobs[0].last_step = json{{"step", 70}, {"steps", 200}, {"loss", 0.1}};
  page.jobs.push_back(Job(8, "own-loop", "RUNNING"));
  page.jobs[1].last_step = json{{"step", 12}};
  page.jobs.push_back(Job(7, "demo", "PENDING"));
  page.jobs[2].reason = "waiting for 2 nodes";
  EXPECT_EQ(
      JobsTable(page),
      "ID  NAME      KIND   STATE    STEP    CREATED                   REASON\n"
      "9   reach-bc  train  RUNNING  70/200  2026-01-02T03:00:00.000Z  \n"
      "8   own-loop  train  RUNNING  12      2026-01-02T03:00:00.000Z  \n"
      "7   demo      train  PENDING  -       2026-01-02T03:00:00.000Z  waiting for 2 nodes\n");
}

TEST(JobFormatTest, JobDetailIsTheJobsJsonThenHowLongItWaitedAndItsLaunchPhases) {
  api::v1::Job j = Job(9, "reach-bc", "PENDING");
  std::string text = JobDetail(j);
  const size_t json_end = text.find("\n}\n") + 3;
  EXPECT_EQ(json::parse(text.substr(0, json_end)), api::v1::ToJson(j)) << text;
  EXPECT_EQ(text.substr(json_end), "\nnot started yet\n");
  j.state = "CANCELLED";
  j.finished_ms = j.created_ms + 10;  // ended before it started: nothing to say
  text = JobDetail(j);
  EXPECT_EQ(text.substr(text.find("\n}\n") + 3), "") << text;

  j = Job(9, "reach-bc", "RUNNING");
  j.started_ms = j.created_ms + 83'400;
  j.wait_seconds = 83.4;
  text = JobDetail(j);
  EXPECT_NE(text.find("\"wait_seconds\": 83.4"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwaited 83.4 s from submission to start\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("launch of attempt"), std::string::npos);
  j.launch_phases = json{{"attempt", 0},
                         {"node", "n1"},
                         {"total_ms", nullptr},
                         {"phases", {{{"phase", "queued"}, {"ms", 12}}}}};
  text = JobDetail(j);
  EXPECT_NE(text.find("launch of attempt 0 on n1: not ended yet"), std::string::npos) << text;
  EXPECT_NE(text.find("queued  12"), std::string::npos) << text;
}

TEST(JobFormatTest, EventsTextIsOneLinePerEvent) {
  api::v1::EventList l{{{1, 1'767'322'800'000, "state", json{{"to", "RUNNING"}}},
                        {2, 1'767'322'801'500, "step", json{{"step", 3}}}}};
  EXPECT_EQ(EventsText(l),
            "2026-01-02T03:00:00.000Z  state  {\"to\":\"RUNNING\"}\n"
            "2026-01-02T03:00:01.500Z  step  {\"step\":3}\n");
}

TEST(JobFormatTest, ProgressLineOfTheViewIsTheLineOfItsJson) {
  api::v1::Job j = Job(9, "reach-bc", "RUNNING");
  j.last_step = json{{"step", 70}, {"steps", 200}, {"loss", 0.1234}};
  EXPECT_EQ(ProgressLine(j, 20), ProgressLine(api::v1::ToJson(j), 20));
  EXPECT_NE(ProgressLine(j, 20).find("step 70/200"), std::string::npos);
  j.last_step.reset();
  j.reason = "waiting for 2 nodes";
  EXPECT_EQ(ProgressLine(j, 20), ProgressLine(api::v1::ToJson(j), 20));
}

}  // namespace
}  // namespace cli
