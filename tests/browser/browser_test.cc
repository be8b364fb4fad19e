// The dashboard in a real browser: a whole stack on loopback (as tests/e2e, planning step times
// on docs/plan/this-machine.json), 10,000 finished jobs and three jobs with 100,000 stored step
// events each seeded into PostgreSQL, then Debian's chromium driven by playwright-core through
// tests/browser/dashboard.mjs: sign in, the forecast and plan beside the submit form, submit
// through the form, watch the job succeed with its kind's charts and both ranks' logs, a bad
// field's error next to it, an asynchronous rl job's health panel, a pending job's forecast,
// comparisons, cancel, pipelines (a small one's DAG and step jobs, cancel from its page, a seeded
// failed gate's values), the viewer role, reconnects, and the timings of the jobs, job and compare
// pages. Screenshots of every page go to the build directory (browser-screenshots/).
//
// Also here, over plain HTTP: what the server sends for the dashboard's files (content types,
// caching) and that no path reaches outside them.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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
    // Step events carry the plan's step time, which the train job's step-time chart draws. Both
    // ranks share this machine with the whole stack: 400% as in the quickstart (docs/planner.md).
    stack_->AddServerFlags({"--plan-cluster",
                            std::string(EMBODY_SOURCE_DIR) + "/docs/plan/this-machine.json",
                            "--plan-deviation-percent", "400"});
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
  // Three finished jobs with 100,000 stored step events of 8 series each, for the chart timings
  // of a job page and of their comparison; their specs differ in engine.optim.lr (and name).
  const std::string big = Sql(
      "INSERT INTO jobs (tenant_id, name, kind, state, reason, priority, spec, created_at, "
      "updated_at, finished_at, exit_code) SELECT t.id, 'metrics-100k-' || k, 'train', "
      "'SUCCEEDED', '', 50, jsonb_build_object('name', 'metrics-100k-' || k, 'kind', 'train', "
      "'engine', jsonb_build_object('optim', jsonb_build_object('steps', 100000, 'lr', "
      "0.001 * k))), now(), now(), now(), 0 FROM tenants t, generate_series(1, 3) k "
      "WHERE t.name = 'default' ORDER BY k RETURNING id");
  std::vector<std::string> big_ids;
  const std::string rows = big + "\n";
  for (size_t at = 0, end; (end = rows.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string line = rows.substr(at, end - at);  // an id, or psql's "INSERT 0 3"
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
      big_ids.push_back(line);
    }
  }
  ASSERT_EQ(big_ids.size(), 3u) << big;
  const std::string big_list = big_ids[0] + "," + big_ids[1] + "," + big_ids[2];
  Sql("INSERT INTO job_events (job_id, time, type, data, step) SELECT j.id, "
      "now() - (100000 - g) * interval '10 ms', 'step', jsonb_build_object('step', g, "
      "'steps', 100000, 'loss', 2.0 / (1 + g / (1000.0 * j.k)) + random() * 0.05, "
      "'tokens_per_s', 40000 + random() * 4000, 'step_seconds', 0.05, 'forward_seconds', 0.02, "
      "'backward_seconds', 0.025, 'packing_efficiency', 0.93, 'lr', 0.001 * j.k), g "
      "FROM unnest(ARRAY[" + big_list + "]::bigint[]) WITH ORDINALITY AS j(id, k), "
      "generate_series(1, 100000) g");

  // A pipeline that ended on a failed gate, as the driver leaves one (docs/pipelines.md): its
  // page must say which values the gate compared. Seeded: running two evaluations to a real
  // failed gate would cost the test a training run. Its eval steps' jobs are two of the above.
  const std::string gate_steps =
      R"([{"name":"eval-bc","state":"succeeded","reason":"job )" + big_ids[0] +
      R"( SUCCEEDED","jobs":[)" + big_ids[0] + R"(],"dataset_id":0,"submitting":null,"gate":null,)"
      R"("started_ms":1767000000000,"finished_ms":1767000060000},)"
      R"({"name":"eval-fp8","state":"succeeded","reason":"job )" + big_ids[1] +
      R"( SUCCEEDED","jobs":[)" + big_ids[1] + R"(],"dataset_id":0,"submitting":null,"gate":null,)"
      R"("started_ms":1767000000000,"finished_ms":1767000060000},)"
      R"({"name":"fp8-gate","state":"gate_failed","reason":"eval-fp8 success_rate 0.5000 is )"
      R"(below the threshold 0.5100","jobs":[],"dataset_id":0,"submitting":null,"gate":)"
      R"({"step":"eval-fp8","metric":"success_rate","job_id":)" + big_ids[1] +
      R"(,"value":0.5,"reference":{"step":"eval-bc","metric":"success_rate","job_id":)" +
      big_ids[0] + R"(,"value":0.54},"minus":0.03,"threshold":0.51,"passed":false},)"
      R"("started_ms":1767000060000,"finished_ms":1767000061000},)"
      R"({"name":"deploy","state":"skipped","reason":"fp8-gate did not succeed","jobs":[],)"
      R"("dataset_id":0,"submitting":null,"gate":null,"started_ms":null,"finished_ms":null}])";
  const std::string gate_spec =
      R"({"name":"gated-fp8","steps":[{"name":"eval-bc","job":{"kind":"eval"}},)"
      R"({"name":"eval-fp8","job":{"kind":"eval"}},{"name":"fp8-gate","needs":["eval-bc",)"
      R"("eval-fp8"],"when":{"step":"eval-fp8","metric":"success_rate","at_least":{"step":)"
      R"("eval-bc","metric":"success_rate","minus":0.03}}},{"name":"deploy","needs":)"
      R"(["fp8-gate"],"job":{"kind":"command"}}]})";
  std::string gated = Sql(
      "INSERT INTO pipelines (tenant_id, token_id, name, state, reason, spec, steps, key, "
      "created_at, updated_at, finished_at) SELECT tk.tenant_id, tk.id, 'gated-fp8', 'failed', "
      "'step fp8-gate: gate failed', '" + gate_spec + "'::jsonb, '" + gate_steps +
      "'::jsonb, 'seeded', now() - interval '2 minutes', now(), now() FROM tokens tk "
      "ORDER BY tk.id LIMIT 1 RETURNING id");
  gated = gated.substr(0, gated.find('\n'));
  ASSERT_FALSE(gated.empty() || gated.find_first_not_of("0123456789") != std::string::npos)
      << gated;

  const std::string shots = std::string(EMBODY_BUILD_DIR) + "/browser-screenshots";
  std::filesystem::create_directories(shots);
  const std::string script = std::string(EMBODY_SOURCE_DIR) + "/tests/browser/dashboard.mjs";
  auto r = embody::testing::RunCommand(
      {"/usr/bin/env", "EMBODY_URL=" + stack_->url(), "EMBODY_ADMIN_TOKEN=" + stack_->admin_token(),
       "EMBODY_BIG_JOBS=" + big_list, "EMBODY_GATE_PIPELINE=" + gated,
       "EMBODY_SCREENSHOTS=" + shots, "EMBODY_WEB_DIR=" + std::string(EMBODY_SOURCE_DIR) + "/web",
       "EMBODY_CHROMIUM=" + std::string(kChromium), EMBODY_NODE, script});
  std::printf("%s\n", r.output.c_str());
  EXPECT_EQ(r.exit_code, 0) << "dashboard.mjs failed; screenshots in " << shots
                            << ", stack in " << stack_->dir();
}

}  // namespace
}  // namespace embody_test
