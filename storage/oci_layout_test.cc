// CheckOciLayout and ImportOciArchive on layouts written here by hand (blobs named by their
// SHA-256), one defect at a time.
#include "storage/oci_layout.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/crypto.h"

namespace storage {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class OciLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("oci_layout_test." + std::to_string(::getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "layout" / "blobs" / "sha256");
    Write("layout/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& rel, const std::string& data) {
    std::ofstream(root_ / rel, std::ios::binary) << data;
  }
  // Stores `data` as a blob and returns its descriptor.
  json Blob(const std::string& media_type, const std::string& data) {
    const std::string hex = common::Sha256Hex(data);
    Write("layout/blobs/sha256/" + hex, data);
    return json{{"mediaType", media_type},
                {"digest", "sha256:" + hex},
                {"size", static_cast<int64_t>(data.size())}};
  }
  // A linux image of one (not really tar) layer, named by index.json; returns the manifest's
  // descriptor.
  json WriteImage(const std::string& os = "linux") {
    json config = Blob(kOciConfigMediaType,
                       json{{"architecture", "amd64"}, {"os", os}, {"rootfs", json::object()}}
                           .dump());
    json layer = Blob("application/vnd.oci.image.layer.v1.tar", std::string(1024, '\0'));
    json manifest = Blob(kOciManifestMediaType,
                         json{{"schemaVersion", 2}, {"config", config}, {"layers", json::array({layer})}}
                             .dump());
    Index(json::array({manifest}));
    return manifest;
  }
  void Index(const json& manifests) {
    Write("layout/index.json", json{{"schemaVersion", 2}, {"manifests", manifests}}.dump());
  }
  std::string Dir() const { return (root_ / "layout").string(); }

  fs::path root_;
};

TEST_F(OciLayoutTest, AcceptsAnImageAndNamesItByItsManifestDigest) {
  json manifest = WriteImage();
  auto image = CheckOciLayout(Dir());
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->digest, manifest["digest"]);
  EXPECT_TRUE(IsOciDigest(image->digest));
  EXPECT_EQ(image->layers, 1);
  EXPECT_EQ(image->os, "linux");
  EXPECT_EQ(image->architecture, "amd64");
  EXPECT_GT(image->bytes, 1024);
  const json m = OciManifestJson(*image);
  EXPECT_EQ(m["format"], "oci");
  EXPECT_EQ(m["image"]["digest"], image->digest);
  EXPECT_EQ(m["stats"]["episodes"], 0);
}

TEST_F(OciLayoutTest, RefusesADamagedOrMissingBlob) {
  json manifest = WriteImage();
  // A layer's bytes changed after it was named.
  for (const auto& e : fs::directory_iterator(root_ / "layout" / "blobs" / "sha256")) {
    if (fs::file_size(e.path()) == 1024) {
      std::ofstream(e.path(), std::ios::binary) << std::string(1024, 'x');
    }
  }
  auto st = CheckOciLayout(Dir()).status();
  EXPECT_NE(st.message().find("does not hash to its digest"), std::string::npos) << st.message();
  fs::remove(root_ / "layout" / "blobs" / "sha256" /
             manifest["digest"].get<std::string>().substr(7));
  st = CheckOciLayout(Dir()).status();
  EXPECT_NE(st.message().find("is not in blobs/sha256/"), std::string::npos) << st.message();
}

TEST_F(OciLayoutTest, RefusesWhatIsNotOneLinuxImage) {
  json manifest = WriteImage();
  Index(json::array({manifest, manifest}));
  EXPECT_NE(CheckOciLayout(Dir()).status().message().find("names 2 manifests"),
            std::string::npos);
  json index = manifest;
  index["mediaType"] = kOciIndexMediaType;
  Index(json::array({index}));
  EXPECT_NE(CheckOciLayout(Dir()).status().message().find("multi-platform"), std::string::npos);
  json wrong_size = manifest;
  wrong_size["size"] = 3;
  Index(json::array({wrong_size}));
  EXPECT_NE(CheckOciLayout(Dir()).status().message().find("its descriptor says"),
            std::string::npos);
  json bad_digest = manifest;
  bad_digest["digest"] = "sha512:abc";
  Index(json::array({bad_digest}));
  EXPECT_FALSE(CheckOciLayout(Dir()).ok());

  WriteImage("windows");
  EXPECT_NE(CheckOciLayout(Dir()).status().message().find("not linux"), std::string::npos);

  WriteImage();
  Write("layout/oci-layout", "{}");  // e.g. what `docker save` writes has none at all
  EXPECT_NE(CheckOciLayout(Dir()).status().message().find("docker save"), std::string::npos);
  fs::remove(root_ / "layout" / "oci-layout");
  EXPECT_FALSE(CheckOciLayout(Dir()).ok());
}

TEST_F(OciLayoutTest, ImportsATarAndRemovesWhatFailed) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no tar";
  WriteImage();
  const std::string tar = (root_ / "image.tar").string();
  ASSERT_EQ(std::system(("tar -cf " + tar + " -C " + Dir() + " .").c_str()), 0);
  auto image = ImportOciArchive(tar, (root_ / "out").string());
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_TRUE(fs::exists(root_ / "out" / "index.json"));

  // A tar of something else: nothing is left behind.
  fs::remove(root_ / "layout" / "index.json");
  ASSERT_EQ(std::system(("tar -cf " + tar + " -C " + Dir() + " .").c_str()), 0);
  EXPECT_FALSE(ImportOciArchive(tar, (root_ / "out2").string()).ok());
  EXPECT_FALSE(fs::exists(root_ / "out2"));
}

}  // namespace
}  // namespace storage
