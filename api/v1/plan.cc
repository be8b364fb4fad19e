#include "api/v1/plan.h"

#include "api/v1/json_fields.h"

namespace api::v1 {

using nlohmann::json;

namespace {

PlanMemory ReadMemory(FieldReader& r) {
  PlanMemory m;
  m.params = r.Number("params");
  m.grads = r.Number("grads");
  m.optimizer = r.Number("optimizer");
  m.activations = r.Number("activations");
  return m;
}

PlanSize ReadSize(FieldReader& r) {
  PlanSize s;
  s.gpus = r.Int32("gpus");
  s.nodes = r.Int32("nodes");
  s.samples_per_rank = r.Number("samples_per_rank");
  s.step_seconds = r.Number("step_seconds");
  s.compute_seconds = r.Number("compute_seconds");
  s.allreduce_seconds = r.Number("allreduce_seconds");
  s.exposed_allreduce_seconds = r.Number("exposed_allreduce_seconds");
  s.data_seconds = r.Number("data_seconds");
  s.tokens_per_s = r.Number("tokens_per_s");
  s.samples_per_s = r.Number("samples_per_s");
  s.epoch_seconds = r.NullableNumber("epoch_seconds");
  s.run_seconds = r.Number("run_seconds");
  s.efficiency = r.Number("efficiency");
  s.bottleneck = r.String("bottleneck");
  s.memory_per_rank_bytes = r.Number("memory_per_rank_bytes");
  s.memory = ReadNested<PlanMemory>(r, "memory", ReadMemory);
  s.fits_memory = r.Bool("fits_memory");
  return s;
}

}  // namespace

json ToJson(const Plan& p) {
  json sizes = json::array();
  for (const PlanSize& s : p.sizes) {
    sizes.push_back({{"gpus", s.gpus},
                     {"nodes", s.nodes},
                     {"samples_per_rank", s.samples_per_rank},
                     {"step_seconds", s.step_seconds},
                     {"compute_seconds", s.compute_seconds},
                     {"allreduce_seconds", s.allreduce_seconds},
                     {"exposed_allreduce_seconds", s.exposed_allreduce_seconds},
                     {"data_seconds", s.data_seconds},
                     {"tokens_per_s", s.tokens_per_s},
                     {"samples_per_s", s.samples_per_s},
                     {"epoch_seconds", OrNull(s.epoch_seconds)},
                     {"run_seconds", s.run_seconds},
                     {"efficiency", s.efficiency},
                     {"bottleneck", s.bottleneck},
                     {"memory_per_rank_bytes", s.memory_per_rank_bytes},
                     {"memory",
                      {{"params", s.memory.params},
                       {"grads", s.memory.grads},
                       {"optimizer", s.memory.optimizer},
                       {"activations", s.memory.activations}}},
                     {"fits_memory", s.fits_memory}});
  }
  return {{"cluster", p.cluster},
          {"allreduce", p.allreduce},
          {"precision", p.precision},
          {"fp8_allreduce", p.fp8_allreduce},
          {"params", p.params},
          {"flops_per_token", p.flops_per_token},
          {"tokens_per_sample", p.tokens_per_sample},
          {"sizes", std::move(sizes)},
          {"efficient_up_to_gpus", p.efficient_up_to_gpus},
          {"efficiency_below_half_at_gpus", OrNull(p.efficiency_below_half_at_gpus)}};
}

common::Result<Plan> ParsePlan(const json& j) {
  return ReadDocument<Plan>(j, [](FieldReader& r) {
    Plan p;
    p.cluster = r.String("cluster");
    p.allreduce = r.String("allreduce");
    p.precision = r.String("precision");
    p.fp8_allreduce = r.Bool("fp8_allreduce");
    p.params = r.Int("params");
    p.flops_per_token = r.Number("flops_per_token");
    p.tokens_per_sample = r.Number("tokens_per_sample");
    p.sizes = ReadArray<PlanSize>(r, "sizes", ReadSize);
    p.efficient_up_to_gpus = r.Int32("efficient_up_to_gpus");
    p.efficiency_below_half_at_gpus = r.NullableInt32("efficiency_below_half_at_gpus");
    return p;
  });
}

}  // namespace api::v1
