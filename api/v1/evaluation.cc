#include "api/v1/evaluation.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

EvaluationTask ReadTask(FieldReader& r) {
  EvaluationTask t;
  t.task = r.String("task");
  t.episodes = r.Int32("episodes");
  t.successes = r.Int32("successes");
  t.success_rate = r.Number("success_rate");
  t.mean_return = r.Number("mean_return");
  t.mean_length = r.Number("mean_length");
  t.checkpoint_step = r.Int("checkpoint_step");
  t.policy = r.String("policy");
  t.fp8 = r.Bool("fp8");
  t.evaluated_ms = r.Time("evaluated_at");
  return t;
}

}  // namespace

json ToJson(const Evaluation& e) {
  json tasks = json::array();
  for (const EvaluationTask& t : e.tasks) {
    tasks.push_back({{"task", t.task},
                     {"episodes", t.episodes},
                     {"successes", t.successes},
                     {"success_rate", t.success_rate},
                     {"mean_return", t.mean_return},
                     {"mean_length", t.mean_length},
                     {"checkpoint_step", t.checkpoint_step},
                     {"policy", t.policy},
                     {"fp8", t.fp8},
                     {"evaluated_at", common::FormatTimeMillis(t.evaluated_ms)}});
  }
  return {{"job_id", e.job_id}, {"tasks", std::move(tasks)}};
}

common::Result<Evaluation> ParseEvaluation(const json& j) {
  return ReadDocument<Evaluation>(j, [](FieldReader& r) {
    Evaluation e;
    e.job_id = r.Int("job_id");
    e.tasks = ReadArray<EvaluationTask>(r, "tasks", ReadTask);
    return e;
  });
}

}  // namespace api::v1
