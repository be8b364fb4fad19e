#include "cli/forecast_format.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

using nlohmann::json;

// The text of a server's reply, read with the forecast codec as the CLI reads it.
std::string TextOf(const json& reply) {
  auto f = api::v1::ParseForecast(reply);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? ForecastText(*f) : "";
}

TEST(ForecastTextTest, SaysWhenWhereHowLongAndWhy) {
  const json f = {{"dry_run", true},
                  {"admitted", true},
                  {"made_at", "2026-01-02T03:04:05.000Z"},
                  {"starts_now", false},
                  {"predicted_start", "2026-01-02T03:24:05.000Z"},
                  {"predicted_wait_seconds", 1200},
                  {"predicted_run_seconds", 100},
                  {"run_time_source", "time_limit"},
                  {"predicted_end", "2026-01-02T03:25:45.000Z"},
                  {"placement",
                   {{"slot_type", "cpu"},
                    {"nodes", {{{"node_id", 2}, {"node", "n2"}, {"ranks", 2}, {"slots", 2}}}}}},
                  {"jobs_ahead", 1},
                  {"reasons", {"reservation for job 17 on 2 nodes from T"}}};
  const std::string text = TextOf(f);
  EXPECT_NE(text.find("start:  2026-01-02T03:24:05.000Z (in 20.0 min), on n2 (2 ranks)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(time_limit)"), std::string::npos) << text;
  EXPECT_NE(text.find("end:    2026-01-02T03:25:45.000Z"), std::string::npos) << text;
  EXPECT_NE(text.find("  - reservation for job 17 on 2 nodes from T"), std::string::npos) << text;
}

TEST(ForecastTextTest, AnUnknownStartSaysSo) {
  const json f = {{"made_at", "2026-01-02T03:04:05.000Z"},
                  {"starts_now", false},
                  {"predicted_start", nullptr},
                  {"predicted_wait_seconds", nullptr},
                  {"predicted_run_seconds", nullptr},
                  {"run_time_source", nullptr},
                  {"predicted_end", nullptr},
                  {"placement", nullptr},
                  {"jobs_ahead", 0},
                  {"reasons", {"run time unknown: no limit"}}};
  const std::string text = TextOf(f);
  EXPECT_NE(text.find("start:  unknown"), std::string::npos) << text;
  EXPECT_NE(text.find("run:    -"), std::string::npos) << text;
  EXPECT_NE(text.find("end:    -"), std::string::npos) << text;
}

}  // namespace
}  // namespace cli
