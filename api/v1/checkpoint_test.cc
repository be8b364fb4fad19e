#include "api/v1/checkpoint.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Checkpoint SampleCheckpoint() {
  Checkpoint c;
  c.id = 12;
  c.job_id = 5;
  c.step = 2000;
  c.bytes = 4096;
  c.sha256 = std::string(64, 'a');
  c.metrics = {{"loss", 0.25}};
  c.state = "ready";
  c.received_bytes = 4096;
  c.created_ms = 1'767'322'800'000;
  c.updated_ms = 1'767'322'860'000;
  return c;
}

TEST(CheckpointViewTest, WritesEveryField) {
  EXPECT_EQ(ToJson(SampleCheckpoint()).dump(),
            R"({"bytes":4096,"created_at":"2026-01-02T03:00:00.000Z","id":12,"job_id":5,)"
            R"("metrics":{"loss":0.25},"received_bytes":4096,"sha256":")" +
                std::string(64, 'a') +
                R"(","state":"ready","step":2000,"updated_at":"2026-01-02T03:01:00.000Z"})");
  Checkpoint none = SampleCheckpoint();
  none.metrics.clear();
  EXPECT_EQ(ToJson(none)["metrics"], json::object());  // an object even when empty
  EXPECT_EQ(ToJson(CheckpointUploadProgress{10}).dump(), R"({"received_bytes":10})");
  EXPECT_EQ(ToJson(CheckpointList{}).dump(), R"({"checkpoints":[]})");
}

TEST(CheckpointViewTest, RoundTrips) {
  Checkpoint uploading = SampleCheckpoint();
  uploading.id = 13;
  uploading.step = 3000;
  uploading.state = "uploading";
  uploading.received_bytes = 100;
  uploading.metrics = {{"loss", 0.125}, {"success_rate", 1}};
  CheckpointList list{{SampleCheckpoint(), uploading}};
  auto back = ParseCheckpointList(ToJson(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
  EXPECT_EQ(*ParseCheckpointUploadProgress(json{{"received_bytes", 10}}),
            CheckpointUploadProgress{10});
  auto metrics = ParseCheckpointMetrics(json{{"loss", 1}, {"acc", 0.5}});
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(*metrics, (std::map<std::string, double>{{"acc", 0.5}, {"loss", 1.0}}));
}

TEST(CheckpointViewTest, EveryFieldIsRequired) {
  for (const char* key : {"metrics", "received_bytes", "updated_at", "sha256"}) {
    json j = ToJson(SampleCheckpoint());
    j.erase(key);
    auto r = ParseCheckpoint(j);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().field(), key);
    EXPECT_EQ(r.status().message(), "is required");
  }
}

TEST(CheckpointViewTest, AWrongTypeIsRefusedWithItsPath) {
  json j = ToJson(CheckpointList{{SampleCheckpoint(), SampleCheckpoint()}});
  j["checkpoints"][1]["metrics"]["loss"] = "low";
  auto r = ParseCheckpointList(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "checkpoints[1].metrics.loss");
  EXPECT_EQ(r.status().message(), "must be a number");
  json c = ToJson(SampleCheckpoint());
  c["step"] = 1.5;
  EXPECT_EQ(ParseCheckpoint(c).status().field(), "step");
  c = ToJson(SampleCheckpoint());
  c["metrics"] = json::array();
  EXPECT_EQ(ParseCheckpoint(c).status().field(), "metrics");
  EXPECT_EQ(ParseCheckpointMetrics(json{{"x", nullptr}}).status().field(), "metrics.x");
  EXPECT_EQ(ParseCheckpointMetrics(json::array()).status().field(), "metrics");
  EXPECT_EQ(ParseCheckpointUploadProgress(json{{"received_bytes", "1"}}).status().field(),
            "received_bytes");
}

}  // namespace
}  // namespace api::v1
