#include "api/v1/dataset.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Dataset SampleDataset() {
  Dataset d;
  d.id = 7;
  d.tenant_id = 2;
  d.tenant = "robotics";
  d.name = "lift";
  d.version = 3;
  d.state = "importing";
  d.source = {{"format", "hdf5"}, {"path", "/d/lift.hdf5"}};
  d.episodes = 0;
  d.path = "/data/tenant-2/dataset-7";
  d.job_id = 41;
  d.created_ms = 1'767'322'800'000;
  d.updated_ms = 1'767'322'801'500;
  return d;
}

TEST(DatasetViewTest, WritesEveryField) {
  EXPECT_EQ(ToJson(SampleDataset()).dump(),
            R"({"bytes":0,"created_at":"2026-01-02T03:00:00.000Z","episodes":0,"error":"",)"
            R"("frames":0,"id":7,"job_id":41,"name":"lift","path":"/data/tenant-2/dataset-7",)"
            R"("received_bytes":0,"source":{"format":"hdf5","path":"/d/lift.hdf5"},)"
            R"("state":"importing","tenant":"robotics","tenant_id":2,)"
            R"("updated_at":"2026-01-02T03:00:01.500Z","version":3})");
  Dataset deleted = SampleDataset();
  deleted.job_id.reset();
  deleted.state = "deleted";
  deleted.directory_removed = false;
  const json j = ToJson(deleted);
  EXPECT_TRUE(j["job_id"].is_null());
  EXPECT_EQ(j["directory_removed"], false);
}

TEST(DatasetViewTest, DetailIsWrittenFlat) {
  DatasetDetail d{SampleDataset(), json{{"stats", {{"episodes", 3}}}}, 0.25};
  const json j = ToJson(d);
  EXPECT_EQ(j["manifest"].dump(), R"({"stats":{"episodes":3}})");
  EXPECT_EQ(j["progress"], 0.25);
  EXPECT_EQ(j["id"], 7);
  EXPECT_FALSE(j.contains("directory_removed"));
  const json none = ToJson(DatasetDetail{SampleDataset(), nullptr, std::nullopt});
  EXPECT_TRUE(none.at("manifest").is_null());
  EXPECT_TRUE(none.at("progress").is_null());
}

TEST(DatasetViewTest, RoundTrips) {
  Dataset ready = SampleDataset();
  ready.id = 8;
  ready.state = "ready";
  ready.episodes = 3;
  ready.frames = 36;
  ready.bytes = 1024;
  ready.job_id.reset();
  ready.error = "";
  ready.received_bytes = 20;
  DatasetList list{{SampleDataset(), ready}, "8"};
  auto back = ParseDatasetList(ToJson(list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
  DatasetList last{{}, std::nullopt};
  EXPECT_EQ(*ParseDatasetList(ToJson(last)), last);

  DatasetDetail detail{ready, json{{"shards", json::array()}}, 1.0};
  auto d = ParseDatasetDetail(ToJson(detail));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, detail);
  Dataset removed = ready;
  removed.directory_removed = true;
  EXPECT_EQ(*ParseDataset(ToJson(removed)), removed);
  DatasetUploadProgress up{7, 8388608};
  EXPECT_EQ(ToJson(up).dump(), R"({"id":7,"received_bytes":8388608})");
  EXPECT_EQ(*ParseDatasetUploadProgress(ToJson(up)), up);
}

TEST(DatasetViewTest, OptionalFieldsMayBeMissing) {
  json j = ToJson(SampleDataset());
  j.erase("received_bytes");
  auto d = ParseDataset(j);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->received_bytes, 0);
  EXPECT_EQ(d->directory_removed, std::nullopt);
  j.erase("job_id");  // nullable, but required
  EXPECT_EQ(ParseDataset(j).status().field(), "job_id");
  EXPECT_EQ(ParseDataset(j).status().message(), "is required");
}

TEST(DatasetViewTest, AWrongTypeIsRefusedWithItsPath) {
  json j = ToJson(DatasetList{{SampleDataset(), SampleDataset()}, std::nullopt});
  j["datasets"][1]["version"] = "3";
  auto r = ParseDatasetList(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "datasets[1].version");
  j = ToJson(DatasetList{{SampleDataset()}, std::nullopt});
  j["next_cursor"] = 8;
  EXPECT_EQ(ParseDatasetList(j).status().field(), "next_cursor");
  json detail = ToJson(DatasetDetail{SampleDataset(), nullptr, std::nullopt});
  detail["manifest"] = "{}";
  EXPECT_EQ(ParseDatasetDetail(detail).status().field(), "manifest");
  EXPECT_EQ(ParseDatasetDetail(detail).status().message(), "must be an object or null");
  detail = ToJson(DatasetDetail{SampleDataset(), nullptr, std::nullopt});
  detail["progress"] = "50%";
  EXPECT_EQ(ParseDatasetDetail(detail).status().field(), "progress");
  json d = ToJson(SampleDataset());
  d["source"] = "/d/lift.hdf5";
  EXPECT_EQ(ParseDataset(d).status().field(), "source");
  d = ToJson(SampleDataset());
  d["directory_removed"] = 1;
  EXPECT_EQ(ParseDataset(d).status().field(), "directory_removed");
}

}  // namespace
}  // namespace api::v1
