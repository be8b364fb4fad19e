#include "api/v1/forecast.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

ForecastNode ReadNode(FieldReader& r) {
  ForecastNode n;
  n.node_id = r.Int("node_id");
  n.node = r.String("node");
  n.ranks = r.Int32("ranks");
  n.slots = r.Int32("slots");
  return n;
}

ForecastPlacement ReadForecastPlacement(FieldReader& r) {
  ForecastPlacement p;
  p.slot_type = r.String("slot_type");
  p.nodes = ReadArray<ForecastNode>(r, "nodes", ReadNode);
  return p;
}

StoredForecast ReadStored(FieldReader& r) {
  StoredForecast f;
  f.made_ms = r.Time("made_at");
  f.start_ms = r.NullableTime("predicted_start");
  f.run_seconds = r.NullableNumber("predicted_run_seconds");
  f.end_ms = r.NullableTime("predicted_end");
  f.start_error_seconds = r.NullableNumber("start_error_seconds");
  f.end_error_seconds = r.NullableNumber("end_error_seconds");
  return f;
}

// The nullable object `key` of `r` read by `read`, its errors reported into `r`.
template <typename T, typename Read>
std::optional<T> ReadNullable(FieldReader& r, const char* key, Read read) {
  const json* o = r.NullableObject(key);
  if (o == nullptr) return std::nullopt;
  FieldReader nested(*o, r.PathOf(key));
  T value = read(nested);
  r.Note(nested.status());
  return value;
}

ForecastStart ReadStart(FieldReader& r) {
  ForecastStart s;
  s.starts_now = r.Bool("starts_now");
  s.start_ms = r.NullableTime("predicted_start");
  s.wait_seconds = r.NullableNumber("predicted_wait_seconds");
  s.placement = ReadNullable<ForecastPlacement>(r, "placement", ReadForecastPlacement);
  s.jobs_ahead = r.Int("jobs_ahead");
  return s;
}

}  // namespace

Forecast ReadForecast(FieldReader& r) {
  Forecast f;
  f.made_ms = r.Time("made_at");
  f.run_seconds = r.NullableNumber("predicted_run_seconds");
  f.run_time_source = r.NullableString("run_time_source");
  f.end_ms = r.NullableTime("predicted_end");
  f.reasons = ReadStrings(r, "reasons");
  if (r.Has("starts_now")) {
    f.start = ReadStart(r);
  } else {
    f.started_ms = r.NullableTime("started_at");
  }
  if (r.Has("as_of")) {
    ForecastCluster c;
    c.as_of_ms = r.Time("as_of");
    c.from = r.String("cluster_from");
    c.hand_over_seconds = r.Number("hand_over_seconds");
    f.cluster = std::move(c);
  }
  if (r.OptionalBool("dry_run").value_or(false)) {
    f.dry_run = r.Bool("admitted");
  }
  if (r.Has("job_id")) {
    ForecastJob job;
    job.job_id = r.Int("job_id");
    job.state = r.String("state");
    job.submitted = ReadNullable<StoredForecast>(r, "submitted_forecast", ReadStored);
    f.job = std::move(job);
  }
  return f;
}

json ToJson(const StoredForecast& f) {
  return {{"made_at", common::FormatTimeMillis(f.made_ms)},
          {"predicted_start", TimeOrNull(f.start_ms)},
          {"predicted_run_seconds", OrNull(f.run_seconds)},
          {"predicted_end", TimeOrNull(f.end_ms)},
          {"start_error_seconds", OrNull(f.start_error_seconds)},
          {"end_error_seconds", OrNull(f.end_error_seconds)}};
}

json ToJson(const Forecast& f) {
  json out = {{"made_at", common::FormatTimeMillis(f.made_ms)},
              {"predicted_run_seconds", OrNull(f.run_seconds)},
              {"run_time_source", OrNull(f.run_time_source)},
              {"predicted_end", TimeOrNull(f.end_ms)},
              {"reasons", f.reasons}};
  if (f.start) {
    const ForecastStart& s = *f.start;
    json placement = nullptr;
    if (s.placement) {
      json nodes = json::array();
      for (const ForecastNode& n : s.placement->nodes) {
        nodes.push_back(
            {{"node_id", n.node_id}, {"node", n.node}, {"ranks", n.ranks}, {"slots", n.slots}});
      }
      placement = {{"slot_type", s.placement->slot_type}, {"nodes", std::move(nodes)}};
    }
    out["starts_now"] = s.starts_now;
    out["predicted_start"] = TimeOrNull(s.start_ms);
    out["predicted_wait_seconds"] = OrNull(s.wait_seconds);
    out["placement"] = std::move(placement);
    out["jobs_ahead"] = s.jobs_ahead;
  } else {
    out["started_at"] = TimeOrNull(f.started_ms);
  }
  if (f.cluster) {
    out["as_of"] = common::FormatTimeMillis(f.cluster->as_of_ms);
    out["cluster_from"] = f.cluster->from;
    out["hand_over_seconds"] = f.cluster->hand_over_seconds;
  }
  if (f.dry_run) {
    out["dry_run"] = true;
    out["admitted"] = true;
  }
  if (f.job) {
    out["job_id"] = f.job->job_id;
    out["state"] = f.job->state;
    out["submitted_forecast"] = f.job->submitted ? ToJson(*f.job->submitted) : json(nullptr);
  }
  return out;
}

common::Result<StoredForecast> ParseStoredForecast(const json& j) {
  return ReadDocument<StoredForecast>(j, ReadStored);
}

common::Result<Forecast> ParseForecast(const json& j) {
  return ReadDocument<Forecast>(j, ReadForecast);
}

}  // namespace api::v1
