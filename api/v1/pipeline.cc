#include "api/v1/pipeline.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

PipelineStep ReadStep(FieldReader& r) {
  PipelineStep s;
  s.name = r.String("name");
  s.state = r.String("state");
  s.reason = r.String("reason");
  s.kind = r.NullableString("kind");
  s.needs = ReadStrings(r, "needs");
  s.retries = r.Int32("retries");
  r.Int32("attempts");  // the size of `jobs`, as is job_id its last: both checked, not kept
  s.jobs = ReadInts(r, "jobs");
  r.NullableInt("job_id");
  s.dataset_id = r.OptionalInt("dataset_id");
  if (const json* gate = r.NullableObject("gate")) s.gate = *gate;
  s.started_ms = r.NullableTime("started_at");
  s.finished_ms = r.NullableTime("finished_at");
  return s;
}

Pipeline ReadPipeline(FieldReader& r) {
  Pipeline p;
  p.id = r.Int("id");
  p.tenant_id = r.Int("tenant_id");
  p.tenant = r.String("tenant");
  p.name = r.String("name");
  p.state = r.String("state");
  p.reason = r.String("reason");
  p.steps = ReadArray<PipelineStep>(r, "steps", ReadStep);
  if (r.Has("spec")) {
    if (const json* spec = r.Object("spec")) p.spec = *spec;
  }
  p.created_ms = r.Time("created_at");
  p.updated_ms = r.Time("updated_at");
  p.finished_ms = r.NullableTime("finished_at");
  return p;
}

PipelineStepForecast ReadStepForecast(FieldReader& r) {
  PipelineStepForecast s;
  s.name = r.String("name");
  s.needs = ReadStrings(r, "needs");
  s.kind = r.String("kind");
  if (r.Has("forecast")) s.forecast = ReadNested<Forecast>(r, "forecast", ReadForecast);
  s.start_ms = r.NullableTime("predicted_start");
  s.end_ms = r.NullableTime("predicted_end");
  s.not_predicted = r.OptionalString("not_predicted");
  return s;
}

json StepJson(const PipelineStep& s) {
  json out = {{"name", s.name},
              {"state", s.state},
              {"reason", s.reason},
              {"kind", OrNull(s.kind)},
              {"needs", s.needs},
              {"retries", s.retries},
              {"attempts", s.jobs.size()},
              {"jobs", s.jobs},
              {"job_id", s.jobs.empty() ? json(nullptr) : json(s.jobs.back())},
              {"gate", s.gate},
              {"started_at", TimeOrNull(s.started_ms)},
              {"finished_at", TimeOrNull(s.finished_ms)}};
  if (s.dataset_id) out["dataset_id"] = *s.dataset_id;
  return out;
}

}  // namespace

json ToJson(const Pipeline& p) {
  json steps = json::array();
  for (const PipelineStep& s : p.steps) steps.push_back(StepJson(s));
  json out = {{"id", p.id},
              {"tenant_id", p.tenant_id},
              {"tenant", p.tenant},
              {"name", p.name},
              {"state", p.state},
              {"reason", p.reason},
              {"steps", std::move(steps)},
              {"created_at", common::FormatTimeMillis(p.created_ms)},
              {"updated_at", common::FormatTimeMillis(p.updated_ms)},
              {"finished_at", TimeOrNull(p.finished_ms)}};
  if (p.spec) out["spec"] = *p.spec;
  return out;
}

json ToJson(const PipelineList& l) {
  json pipelines = json::array();
  for (const Pipeline& p : l.pipelines) pipelines.push_back(ToJson(p));
  return {{"pipelines", std::move(pipelines)}, {"next_cursor", OrNull(l.next_cursor)}};
}

json ToJson(const PipelineDryRun& d) {
  json steps = json::array();
  for (const PipelineStepForecast& s : d.steps) {
    json step = {{"name", s.name},
                 {"needs", s.needs},
                 {"kind", s.kind},
                 {"predicted_start", TimeOrNull(s.start_ms)},
                 {"predicted_end", TimeOrNull(s.end_ms)}};
    if (s.forecast) step["forecast"] = ToJson(*s.forecast);
    if (s.not_predicted) step["not_predicted"] = *s.not_predicted;
    steps.push_back(std::move(step));
  }
  return {{"dry_run", true},
          {"admitted", true},
          {"name", d.name},
          {"made_at", common::FormatTimeMillis(d.made_ms)},
          {"predicted_end", TimeOrNull(d.end_ms)},
          {"steps", std::move(steps)}};
}

common::Result<Pipeline> ParsePipeline(const json& j) {
  return ReadDocument<Pipeline>(j, ReadPipeline);
}

common::Result<PipelineList> ParsePipelineList(const json& j) {
  return ReadDocument<PipelineList>(j, [](FieldReader& r) {
    PipelineList l;
    l.pipelines = ReadArray<Pipeline>(r, "pipelines", ReadPipeline);
    l.next_cursor = r.NullableString("next_cursor");
    return l;
  });
}

common::Result<PipelineDryRun> ParsePipelineDryRun(const json& j) {
  return ReadDocument<PipelineDryRun>(j, [](FieldReader& r) {
    PipelineDryRun d;
    r.Bool("dry_run");
    r.Bool("admitted");
    d.name = r.String("name");
    d.made_ms = r.Time("made_at");
    d.end_ms = r.NullableTime("predicted_end");
    d.steps = ReadArray<PipelineStepForecast>(r, "steps", ReadStepForecast);
    return d;
  });
}

}  // namespace api::v1
