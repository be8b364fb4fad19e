// Import sources and dataset references: what is accepted, and the field named on refusal.
#include "api/dataset_ref.h"

#include <gtest/gtest.h>

#include "api/job_spec.h"

namespace api {
namespace {

using nlohmann::json;

TEST(ImportSourceTest, AcceptsAbsolutePathWithOptions) {
  auto s = ParseImportSource(
      json{{"format", "hdf5"}, {"path", "/data/lift.hdf5"}, {"filter", "train"}, {"language", "lift"}},
      "source");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->path, "/data/lift.hdf5");
  EXPECT_EQ(s->filter, "train");
  EXPECT_EQ(ToJson(*s)["language"], "lift");
  EXPECT_EQ(ParseImportSource(json{{"path", "/a.hdf5"}}, "source")->format, "hdf5");
}

TEST(ImportSourceTest, RefusesPathsThatAreNotPlainAbsolute) {
  for (const char* bad : {"", "rel/a.hdf5", "/a/../etc/shadow", "/a/./b", "/a//b", "/a/",
                          "/a/..", "/a\nb"}) {
    auto s = ParseImportSource(json{{"path", bad}}, "source");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().field(), "source.path") << bad;
  }
  EXPECT_FALSE(ParseImportSource(json{{"path", "/" + std::string(5000, 'a')}}, "source").ok());
  EXPECT_EQ(ParseImportSource(json{{"path", "/a"}, {"filter", "a b"}}, "source").status().field(),
            "source.filter");
  EXPECT_EQ(ParseImportSource(json{{"path", "/a"}, {"extra", "x"}}, "source").status().field(),
            "source.extra");
  EXPECT_EQ(ParseImportSource(json{{"path", "/a"}, {"format", "mp4"}}, "source").status().code(),
            common::Code::kUnimplemented);
  EXPECT_EQ(ParseImportSource(json{{"path", 3}}, "source").status().field(), "source.path");
  EXPECT_EQ(ParseImportSource(json::object(), "source").status().field(), "source.path");
}

TEST(DatasetRefTest, ParsesNameAndVersion) {
  auto none = ParseDatasetRef("sim:reach", "f");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto latest = ParseDatasetRef("dataset:lift-ph", "f");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->name, "lift-ph");
  EXPECT_FALSE((*latest)->version);
  auto v3 = ParseDatasetRef("dataset:lift@3", "f");
  ASSERT_TRUE(v3.ok() && v3->has_value());
  EXPECT_EQ(*(*v3)->version, 3);
  for (const char* bad : {"dataset:", "dataset:a b", "dataset:a@", "dataset:a@0", "dataset:a@x",
                          "dataset:a@1@2", "dataset:a@-1"}) {
    auto r = ParseDatasetRef(bad, "engine.data.dataset");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "engine.data.dataset");
  }
}

TEST(DatasetRefTest, JobSpecAcceptsDatasetNamesAndImportKind) {
  json train{{"name", "t"}, {"kind", "train"}, {"resources", {{"nodes", 1}}},
             {"engine", {{"data", {{"dataset", "dataset:lift@2"}}}}}};
  auto spec = ParseJobSpec(train, SpecLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(ToJson(*spec)["engine"]["data"]["dataset"], "dataset:lift@2");
  train["engine"]["data"]["dataset"] = "lift";
  EXPECT_EQ(ParseJobSpec(train, SpecLimits{}).status().field(), "engine.data.dataset");

  json imp{{"name", "import-lift"}, {"kind", "import"}, {"resources", {{"nodes", 1}}},
           {"import", {{"dataset_id", 7}, {"source", {{"path", "/d/lift.hdf5"}}}}}};
  auto is = ParseJobSpec(imp, SpecLimits{});
  ASSERT_TRUE(is.ok()) << is.status().message();
  EXPECT_EQ(is->kind, JobKind::kImport);
  EXPECT_EQ(is->import_dataset_id, 7);
  auto again = ParseJobSpec(ToJson(*is), SpecLimits{});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->import_source.path, "/d/lift.hdf5");
  imp["import"]["source"]["path"] = "../x";
  EXPECT_EQ(ParseJobSpec(imp, SpecLimits{}).status().field(), "import.source.path");
  imp.erase("import");
  EXPECT_EQ(ParseJobSpec(imp, SpecLimits{}).status().field(), "import");
  train["engine"]["data"]["dataset"] = "sim:reach";
  train["import"] = {{"dataset_id", 1}};
  EXPECT_EQ(ParseJobSpec(train, SpecLimits{}).status().field(), "import");
}

}  // namespace
}  // namespace api
