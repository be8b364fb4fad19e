// Dataset references (sim:, dir:, dataset:) and import sources: what is accepted, and the field
// named on refusal.
#include "api/dataset_ref.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/job_spec.h"

namespace api {
namespace {

using nlohmann::json;

TEST(DatasetRefTest, BuiltInAndDirectory) {
  auto sim = ParseDatasetRef("sim:reach");
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim->kind, DatasetRef::Kind::kSimReach);
  EXPECT_FALSE(sim->is_directory());
  EXPECT_FALSE(sim->is_stored());

  auto dir = ParseDatasetRef("dir:/data/lift/");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(dir->is_directory());
  EXPECT_EQ(dir->path, "/data/lift");                      // trailing slash dropped
  auto dotted = ParseDatasetRef("dir:/data/v1.2/..lift");  // dots inside names are fine
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(dotted->path, "/data/v1.2/..lift");
}

TEST(DatasetRefTest, BuiltInTableTopTasks) {
  for (const std::string task : {"push", "pick_place"}) {
    auto ref = ParseDatasetRef("sim:" + task);
    ASSERT_TRUE(ref.ok()) << task;
    EXPECT_EQ(ref->kind, DatasetRef::Kind::kSimTask);
    EXPECT_EQ(ref->sim_task, task);
    EXPECT_TRUE(ref->is_builtin());
    EXPECT_TRUE(IsBuiltinDataset("sim:" + task));
  }
  EXPECT_TRUE(ParseDatasetRef("sim:reach")->is_builtin());
  EXPECT_FALSE(ParseDatasetRef("dir:/data")->is_builtin());
  EXPECT_FALSE(ParseDatasetRef("sim:stack").ok());
  EXPECT_FALSE(ParseDatasetRef("sim:push ").ok());
  EXPECT_FALSE(IsBuiltinDataset("sim:"));
}

TEST(DatasetRefTest, TableTopTasksAreBuiltInStreamsInAJobSpec) {
  // The longest built-in sample bounds tokens_per_row, and dataset-only keys are refused, as for
  // sim:reach; the spec round-trips without them.
  json spec = {{"name", "push-bc"},
               {"kind", "train"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"engine", {{"data", {{"dataset", "sim:push"}, {"tokens_per_row", 512}}}}}};
  auto ok = ParseJobSpec(spec, SpecLimits{});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->engine.data.dataset, "sim:push");
  EXPECT_FALSE(ToJson(*ok)["engine"]["data"].contains("cameras"));
  json small = spec;
  small["engine"]["data"]["tokens_per_row"] = 64;
  EXPECT_FALSE(ParseJobSpec(small, SpecLimits{}).ok());
  json cams = spec;
  cams["engine"]["data"]["cameras"] = json::array({"agentview_image"});
  EXPECT_FALSE(ParseJobSpec(cams, SpecLimits{}).ok());
}

TEST(DatasetRefTest, RefusesWhatIsNotAPlainAbsoluteDirectory) {
  for (const std::string& bad : std::vector<std::string>{
           "", "sim:other", "s3://bucket/x", "lift", "dir:", "dir:relative/path", "dir:/a/../b",
           "dir:/a/./b", "dir:/..", "dir:/a/..", std::string("dir:/a\nb"),
           std::string("dir:/a\0b", 8), "dir:/" + std::string(kMaxDatasetPathBytes, 'x')}) {
    auto r = ParseDatasetRef(bad);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
      EXPECT_EQ(r.status().field(), "engine.data.dataset");
    }
  }
}

TEST(DatasetRefTest, ParsesStoredNameAndVersion) {
  auto latest = ParseDatasetRef("dataset:lift-ph", "f");
  ASSERT_TRUE(latest.ok());
  EXPECT_TRUE(latest->is_stored());
  EXPECT_FALSE(latest->is_directory());
  EXPECT_EQ(latest->name, "lift-ph");
  EXPECT_FALSE(latest->version);
  auto v3 = ParseDatasetRef("dataset:lift@3", "f");
  ASSERT_TRUE(v3.ok() && v3->is_stored());
  EXPECT_EQ(*v3->version, 3);
  EXPECT_TRUE(ParseDatasetRef("dataset:a@" + std::to_string(kMaxDatasetVersion)).ok());
  for (const std::string& bad :
       {std::string("dataset:"), std::string("dataset:a b"), std::string("dataset:a@"),
        std::string("dataset:a@0"), std::string("dataset:a@x"), std::string("dataset:a@1@2"),
        std::string("dataset:a@-1"), std::string("dataset:a@+1"), std::string("dataset:../a"),
        "dataset:a@" + std::to_string(kMaxDatasetVersion + 1),
        "dataset:" + std::string(129, 'a')}) {
    auto r = ParseDatasetRef(bad, "engine.data.dataset");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().field(), "engine.data.dataset");
  }
}

TEST(ImportSourceTest, AcceptsAbsolutePathWithOptions) {
  auto s = ParseImportSource(json{{"format", "hdf5"},
                                  {"path", "/data/lift.hdf5"},
                                  {"filter", "train"},
                                  {"language", "lift"}},
                             "source");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->path, "/data/lift.hdf5");
  EXPECT_EQ(s->filter, "train");
  EXPECT_EQ(ToJson(*s)["language"], "lift");
  EXPECT_EQ(ParseImportSource(json{{"path", "/a.hdf5"}}, "source")->format, "hdf5");
}

TEST(ImportSourceTest, LerobotIsADirectoryWithItsOwnOptions) {
  auto s = ParseImportSource(json{{"format", "lerobot"},
                                  {"path", "/data/lerobot/pusht"},
                                  {"resize", "96x128"},
                                  {"language", "push"}},
                             "source");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->is_lerobot());
  EXPECT_EQ(s->resize_height, 96);
  EXPECT_EQ(s->resize_width, 128);
  EXPECT_EQ(ResizeText(*s), "96x128");
  // What goes into the job's spec parses back to the same source.
  auto again = ParseImportSource(ToJson(*s), "import.source");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJson(*again), ToJson(*s));
  EXPECT_FALSE(ToJson(*ParseImportSource(json{{"format", "lerobot"}, {"path", "/d"}}, "source"))
                   .contains("resize"));

  // An upload of a LeRobot dataset is a tar of its directory; it keeps the LeRobot options.
  const json upload{{"bytes", 4}, {"sha256", std::string(64, 'b')}};
  auto up = ParseImportSource(
      json{{"format", "lerobot"}, {"upload", upload}, {"resize", "8x8"}}, "source");
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_TRUE(up->is_lerobot());
  ASSERT_TRUE(up->upload);
  EXPECT_EQ(up->upload->bytes, 4);
  EXPECT_EQ(ToJson(*up), json({{"format", "lerobot"}, {"upload", upload}, {"resize", "8x8"}}));
  EXPECT_EQ(ParseImportSource(json{{"format", "lerobot"}, {"upload", upload}, {"nan", "skip"}},
                              "source")
                .status()
                .field(),
            "source.nan");
  EXPECT_EQ(ParseImportSource(json{{"format", "lerobot"}, {"path", "/d/x.h5"}}, "source")
                .status()
                .field(),
            "source.path");
  EXPECT_EQ(
      ParseImportSource(json{{"format", "lerobot"}, {"path", "/d"}, {"filter", "t"}}, "source")
          .status()
          .field(),
      "source.filter");
  EXPECT_EQ(
      ParseImportSource(json{{"path", "/d.hdf5"}, {"resize", "9x9"}}, "source").status().field(),
      "source.resize");
  for (const char* bad : {"", "x", "9", "9x", "x9", "0x9", "9x0", "-1x9", "9x16385", "9x9x9"}) {
    EXPECT_EQ(
        ParseImportSource(json{{"format", "lerobot"}, {"path", "/d"}, {"resize", bad}}, "source")
            .status()
            .field(),
        "source.resize")
        << bad;
  }
}

TEST(ImportSourceTest, AnOciImageIsATarWithoutDatasetOptions) {
  const json upload{{"bytes", 4}, {"sha256", std::string(64, 'c')}};
  auto up = ParseImportSource(json{{"format", "oci"}, {"upload", upload}}, "source");
  ASSERT_TRUE(up.ok()) << up.status().message();
  EXPECT_TRUE(up->is_oci());
  EXPECT_EQ(ToJson(*up), json({{"format", "oci"}, {"upload", upload}}));
  EXPECT_TRUE(ParseImportSource(json{{"format", "oci"}, {"path", "/srv/img.tar"}}, "source").ok());
  for (const char* key : {"filter", "nan", "language", "resize"}) {
    auto s = ParseImportSource(json{{"format", "oci"}, {"upload", upload}, {key, "x"}}, "source");
    EXPECT_EQ(s.status().field(), std::string("source.") + key) << key;
  }
}

TEST(ImportSourceTest, RefusesPathsThatAreNotPlainAbsolute) {
  for (const char* bad :
       {"", "rel/a.hdf5", "/a/../etc/shadow", "/a/./b", "/a//b", "/a/", "/a/..", "/a\nb"}) {
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
  EXPECT_EQ(ParseImportSource(json{{"path", "/a"}, {"nan", "ignore"}}, "source").status().field(),
            "source.nan");
  auto skip = ParseImportSource(json{{"path", "/a"}, {"nan", "skip"}}, "source");
  ASSERT_TRUE(skip.ok());
  EXPECT_TRUE(skip->skip_nan);
  EXPECT_EQ(ToJson(*skip)["nan"], "skip");
  EXPECT_FALSE(ParseImportSource(json{{"path", "/a"}, {"nan", "refuse"}}, "source")->skip_nan);
  EXPECT_EQ(ParseImportSource(json::object(), "source").status().field(), "source.path");
}

TEST(ImportSourceTest, AnUploadIsBoundedAndExclusiveOfAPath) {
  const std::string sha(64, 'c');
  auto s = ParseImportSource(json{{"upload", {{"bytes", 1024}, {"sha256", sha}}}, {"filter", "t"}},
                             "source");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->upload);
  EXPECT_EQ(s->upload->bytes, 1024);
  EXPECT_TRUE(s->path.empty());
  // Round trip: the import job's spec carries the same upload, no path.
  json j = ToJson(*s);
  EXPECT_EQ(j["upload"]["sha256"], sha);
  EXPECT_FALSE(j.contains("path"));
  EXPECT_EQ(ParseImportSource(j, "source")->upload->bytes, 1024);

  auto field = [&](const json& src) { return ParseImportSource(src, "source").status().field(); };
  EXPECT_EQ(field(json{{"path", "/a"}, {"upload", {{"bytes", 1}, {"sha256", sha}}}}),
            "source.upload");
  for (const json& bytes : {json(0), json(-1), json(1.5), json("1"), json(int64_t{1} << 51),
                            json(uint64_t{1} << 63)}) {
    EXPECT_EQ(field(json{{"upload", {{"bytes", bytes}, {"sha256", sha}}}}), "source.upload.bytes")
        << bytes.dump();
  }
  EXPECT_EQ(field(json{{"upload", {{"bytes", 1}, {"sha256", std::string(64, 'C')}}}}),
            "source.upload.sha256");
  EXPECT_EQ(field(json{{"upload", {{"bytes", 1}}}}), "source.upload.sha256");
  EXPECT_EQ(field(json{{"upload", {{"bytes", 1}, {"sha256", sha}, {"x", 1}}}}), "source.upload.x");
  EXPECT_EQ(field(json{{"upload", "file"}}), "source.upload");
}

TEST(DatasetRefTest, JobSpecAcceptsDatasetNamesAndImportKind) {
  json train{{"name", "t"},
             {"kind", "train"},
             {"resources", {{"nodes", 1}}},
             {"engine", {{"data", {{"dataset", "dataset:lift@2"}}}}}};
  auto spec = ParseJobSpec(train, SpecLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(ToJson(*spec)["engine"]["data"]["dataset"], "dataset:lift@2");
  // A stored dataset takes the same sample options as a directory (it is launched as one).
  train["engine"]["data"]["image_size"] = 64;
  EXPECT_TRUE(ParseJobSpec(train, SpecLimits{}).ok());
  train["engine"]["data"]["dataset"] = "lift";
  EXPECT_EQ(ParseJobSpec(train, SpecLimits{}).status().field(), "engine.data.dataset");

  json imp{{"name", "import-lift"},
           {"kind", "import"},
           {"resources", {{"nodes", 1}}},
           {"import", {{"dataset_id", 7}, {"source", {{"path", "/d/lift.hdf5"}}}}}};
  auto is = ParseJobSpec(imp, SpecLimits{});
  ASSERT_TRUE(is.ok()) << is.status().message();
  EXPECT_EQ(is->kind, JobKind::kImport);
  EXPECT_EQ(is->import_dataset_id, 7);
  auto again = ParseJobSpec(ToJson(*is), SpecLimits{});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->import_source.path, "/d/lift.hdf5");
  imp["init_from"] = 3;
  EXPECT_EQ(ParseJobSpec(imp, SpecLimits{}).status().field(), "init_from");
  imp.erase("init_from");
  imp["import"]["source"]["path"] = "../x";
  EXPECT_EQ(ParseJobSpec(imp, SpecLimits{}).status().field(), "import.source.path");
  imp.erase("import");
  EXPECT_EQ(ParseJobSpec(imp, SpecLimits{}).status().field(), "import");
  train["engine"]["data"]["dataset"] = "sim:reach";
  train["engine"]["data"].erase("image_size");
  train["import"] = {{"dataset_id", 1}};
  EXPECT_EQ(ParseJobSpec(train, SpecLimits{}).status().field(), "import");
}

}  // namespace
}  // namespace api
