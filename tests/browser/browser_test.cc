// The dashboard in a real browser: a whole stack on loopback (as tests/e2e), 10,000 finished jobs
// and a job with 100,000 stored step events seeded into PostgreSQL, then Debian's chromium driven
// by playwright-core through tests/browser/dashboard.mjs: sign in, submit through the form, watch
// the job succeed with charts and both ranks' logs, a bad field's error next to it, cancel, the
// viewer role, reconnects, and the timings of the jobs and job pages. Screenshots of every page
// go to the build directory (browser-screenshots/).
//
// Also here, over plain HTTP: what the server sends for the dashboard's files (content types,
// caching) and that no path reaches outside them.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

constexpr char kChromium[] = "/usr/bin/chromium";

class BrowserTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::access(kChromium, X_OK) != 0) return;
    stack_ = new LocalStack(2, 1);
    ASSERT_TRUE(stack_->Start()) << "stack in " << stack_->dir();
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  void SetUp() override {
    if (::access(kChromium, X_OK) != 0) {
      GTEST_SKIP() << "chromium is not installed at " << kChromium
                   << " (Debian package `chromium`, installed by deploy/setup.sh): the browser "
                      "test cannot run";
    }
    ASSERT_NE(stack_, nullptr);
  }
  static std::string Sql(const std::string& sql) {
    auto r = stack_->pg().Psql(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : "";
  }
  static LocalStack* stack_;
};

LocalStack* BrowserTest::stack_ = nullptr;

TEST_F(BrowserTest, ServesTheDashboardsFilesWithTypesAndCaching) {
  httplib::Client c(stack_->url());
  auto index = c.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(index->get_header_value("Cache-Control"), "no-cache");
  EXPECT_NE(index->body.find("<div id=\"app\">"), std::string::npos);
  // Client-side routes get the same page.
  auto deep = c.Get("/jobs/12345?state=RUNNING");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 200);
  EXPECT_EQ(deep->body, index->body);

  // The hashed bundle index.html names: long-lived, with its type.
  const std::string& html = index->body;
  size_t at = html.find("/assets/main-");
  ASSERT_NE(at, std::string::npos) << html;
  std::string js = html.substr(at, html.find('"', at) - at);
  if (js.size() < 3 || js.substr(js.size() - 3) != ".js") {
    at = html.find("/assets/main-", at + 1);
    js = html.substr(at, html.find('"', at) - at);
  }
  auto bundle = c.Get(js);
  ASSERT_TRUE(bundle);
  EXPECT_EQ(bundle->status, 200) << js;
  EXPECT_EQ(bundle->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(bundle->get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_GT(bundle->body.size(), 10000u);
  // Compressed for a browser that accepts it: gzip, even where Brotli is offered (httplib's
  // Brotli takes 20 times longer; api_server.cc).
  httplib::Headers gzip = {{"Accept-Encoding", "gzip, deflate, br, zstd"}};
  auto packed = c.Get(js, gzip);
  ASSERT_TRUE(packed);
  EXPECT_EQ(packed->get_header_value("Content-Encoding"), "gzip");

  // Nothing outside the dashboard's files. The server serves build/web/dist, so build/web/Makefile
  // and build/CMakeCache.txt are real files two and three levels above assets/; every spelling of
  // a way to them is refused, as is index.html through assets/.
  for (const char* p :
       {"/assets/missing-123.js", "/assets/..%2f..%2fMakefile", "/assets/%2e%2e/%2e%2e/Makefile",
        "/assets/..%2f..%2f..%2fCMakeCache.txt", "/assets/../../../CMakeCache.txt",
        "/assets/..%2findex.html", "/assets/%2fetc%2fpasswd", "/assets/..\\..\\Makefile"}) {
    auto r = c.Get(p);
    ASSERT_TRUE(r) << p;
    EXPECT_TRUE(r->status == 404 || r->status == 400) << p << " answered " << r->status;
    EXPECT_EQ(r->body.find("CMAKE"), std::string::npos) << p;
    EXPECT_EQ(r->body.find("root:"), std::string::npos) << p;
    EXPECT_EQ(r->body.find("<div id=\"app\">"), std::string::npos) << p;
  }
  // The API's unknown paths stay JSON 404s; its health routes are untouched.
  auto api = c.Get("/v1/no-such-thing");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 404);
  EXPECT_NE(api->body.find("\"not_found\""), std::string::npos) << api->body;
  auto health = c.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_NE(health->body.find("ok"), std::string::npos);
}

TEST_F(BrowserTest, DashboardInChromium) {
  // 10,000 finished jobs, for the jobs page and its pagination.
  Sql("INSERT INTO jobs (tenant_id, name, kind, state, reason, priority, spec, created_at, "
      "updated_at, started_at, finished_at, exit_code) "
      "SELECT t.id, 'bulk-' || g, 'train', (ARRAY['SUCCEEDED','FAILED','CANCELLED'])[1 + g % 3], "
      "'', 50, '{\"name\":\"bulk\"}'::jsonb, now() - (10001 - g) * interval '1 minute', now(), "
      "now() - (10001 - g) * interval '1 minute', now(), 0 "
      "FROM generate_series(1, 10000) g, tenants t WHERE t.name = 'default'");
  // A finished job with 100,000 stored step events of 8 series each, for the chart timing.
  const std::string big = Sql(
      "INSERT INTO jobs (tenant_id, name, kind, state, reason, priority, spec, created_at, "
      "updated_at, finished_at, exit_code) SELECT id, 'metrics-100k', 'train', 'SUCCEEDED', '', "
      "50, '{\"name\":\"metrics-100k\"}'::jsonb, now(), now(), now(), 0 FROM tenants "
      "WHERE name = 'default' RETURNING id");
  const std::string big_id = big.substr(0, big.find('\n'));
  ASSERT_FALSE(big_id.empty());
  Sql("INSERT INTO job_events (job_id, time, type, data, step) SELECT " + big_id +
      ", now() - (100000 - g) * interval '10 ms', 'step', jsonb_build_object('step', g, "
      "'steps', 100000, 'loss', 2.0 / (1 + g / 1000.0) + random() * 0.05, 'tokens_per_s', "
      "40000 + random() * 4000, 'step_seconds', 0.05, 'forward_seconds', 0.02, "
      "'backward_seconds', 0.025, 'packing_efficiency', 0.93, 'lr', 0.001), g "
      "FROM generate_series(1, 100000) g");

  const std::string shots = std::string(EMBODY_BUILD_DIR) + "/browser-screenshots";
  std::filesystem::create_directories(shots);
  const std::string script = std::string(EMBODY_SOURCE_DIR) + "/tests/browser/dashboard.mjs";
  auto r = embody::testing::RunCommand(
      {"/usr/bin/env", "EMBODY_URL=" + stack_->url(), "EMBODY_ADMIN_TOKEN=" + stack_->admin_token(),
       "EMBODY_BIG_JOB=" + big_id,
       "EMBODY_SCREENSHOTS=" + shots, "EMBODY_WEB_DIR=" + std::string(EMBODY_SOURCE_DIR) + "/web",
       "EMBODY_CHROMIUM=" + std::string(kChromium), EMBODY_NODE, script});
  std::printf("%s\n", r.output.c_str());
  EXPECT_EQ(r.exit_code, 0) << "dashboard.mjs failed; screenshots in " << shots
                            << ", stack in " << stack_->dir();
}

}  // namespace
}  // namespace embody_test
