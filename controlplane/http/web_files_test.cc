#include "controlplane/http/web_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace controlplane::http {
namespace {

namespace fs = std::filesystem;

class WebFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/embody-web-files-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    dir_ = root_ + "/dist";
    fs::create_directories(dir_ + "/assets");
    Write(dir_ + "/index.html", "<!doctype html>");
    Write(dir_ + "/assets/app-3F2A.js", "x");
    Write(dir_ + "/assets/app-3F2A.css", "x");
    Write(root_ + "/secret.txt", "secret");
    fs::create_symlink(root_ + "/secret.txt", dir_ + "/assets/link.js");
  }
  void TearDown() override { fs::remove_all(root_); }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  std::string root_, dir_;
};

TEST_F(WebFilesTest, AssetsAreImmutableWithTheirContentType) {
  auto js = ResolveWebPath(dir_, "/assets/app-3F2A.js");
  ASSERT_TRUE(js.ok()) << js.status().ToString();
  EXPECT_EQ(js->path, dir_ + "/assets/app-3F2A.js");
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js->cache_control, std::string(kImmutableCache));
  auto css = ResolveWebPath(dir_, "/assets/app-3F2A.css");
  ASSERT_TRUE(css.ok());
  EXPECT_EQ(css->content_type, "text/css; charset=utf-8");
}

TEST_F(WebFilesTest, EveryOtherPathIsTheRevalidatedIndex) {
  for (const char* p : {"/", "/jobs", "/jobs/42", "/nodes?x=1", "/v1x", "/metricsfoo",
                        "/assetsfoo", "/index.html"}) {
    auto f = ResolveWebPath(dir_, p);
    ASSERT_TRUE(f.ok()) << p;
    EXPECT_EQ(f->path, dir_ + "/index.html") << p;
    EXPECT_EQ(f->content_type, "text/html; charset=utf-8");
    EXPECT_EQ(f->cache_control, "no-cache");
  }
}

TEST_F(WebFilesTest, ApiPathsAreNeverTheDashboards) {
  for (const char* p : {"/v1", "/v1/", "/v1/jobs", "/v1/nope", "/metrics", "/healthz", "/readyz"}) {
    EXPECT_TRUE(IsApiPath(p)) << p;
    EXPECT_EQ(ResolveWebPath(dir_, p).status().code(), common::Code::kNotFound) << p;
  }
  for (const char* p : {"/", "/v1x", "/jobs/v1", "/metrics/x", "/healthzz"}) {
    EXPECT_FALSE(IsApiPath(p)) << p;
  }
}

TEST_F(WebFilesTest, NoPathLeavesTheAssetsDirectory) {
  // httplib hands handlers the decoded path, so %2e%2e%2f arrives here as ../
  for (const char* p :
       {"/assets/../../secret.txt", "/assets/../index.html", "/assets/..", "/assets/.",
        "/assets/", "/assets/sub/app.js", "/assets//etc/passwd", "/assets/.hidden",
        "/assets/a\\..\\b", "/assets/link.js", "/assets/missing.js",
        "/assets/%2e%2e%2fsecret.txt"}) {
    auto f = ResolveWebPath(dir_, p);
    EXPECT_EQ(f.status().code(), common::Code::kNotFound) << p;
  }
  std::string with_nul = std::string("/assets/app-3F2A.js") + '\0' + "/../../secret.txt";
  EXPECT_EQ(ResolveWebPath(dir_, with_nul).status().code(), common::Code::kNotFound);
  EXPECT_EQ(ResolveWebPath(dir_, "/assets/" + std::string(200, 'a') + ".js").status().code(),
            common::Code::kNotFound);
}

TEST(WebContentTypeTest, ByExtension) {
  EXPECT_EQ(ContentTypeFor("a.map"), "application/json");
  EXPECT_EQ(ContentTypeFor("a.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("a.woff2"), "font/woff2");
  EXPECT_EQ(ContentTypeFor("a"), "application/octet-stream");
  EXPECT_EQ(ContentTypeFor("a.exe"), "application/octet-stream");
}

}  // namespace
}  // namespace controlplane::http
