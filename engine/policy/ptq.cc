#include "engine/policy/ptq.h"

#include <cmath>
#include <set>
#include <utility>

#include "engine/model/policy_options.h"
#include "engine/sim/reach_task.h"

namespace engine {

common::Result<api::EngineOptions> EngineOptionsFromCheckpointConfig(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("engine") || !config["engine"].is_object()) {
    return common::InvalidArgument("the checkpoint's config has no engine options");
  }
  // The engine section is validated exactly as a submitted JobSpec's is.
  const nlohmann::json spec = {
      {"name", "quantize"},
      {"kind", "train"},
      {"resources", {{"nodes", 1}, {"ranks_per_node", 1}, {"slot_type", "cpu"}}},
      {"engine", config["engine"]}};
  auto parsed = api::ParseJobSpec(spec, api::SpecLimits{});
  if (!parsed.ok()) {
    return common::InvalidArgument("the checkpoint's engine options: " +
                                   parsed.status().ToString());
  }
  return parsed->engine;
}

nlohmann::json Fp8StatsJson(const fp8::Fp8Stats& s) {
  return {{"elements", s.elements},       {"amax", s.amax},
          {"scale_min", s.scale_min},     {"scale_max", s.scale_max},
          {"saturated", s.saturated},     {"underflowed", s.underflowed},
          {"nan", s.nan}};
}

common::Result<Fp8CheckpointData> QuantizeToFp8Checkpoint(const PolicyTransformer& model,
                                                          int64_t step,
                                                          const nlohmann::json& config,
                                                          const PtqOptions& options,
                                                          QuantizedPolicy* summary) {
  EMBODY_ASSIGN_OR_RETURN(q, QuantizePolicy(model, options));
  Fp8CheckpointData d;
  d.step = step;
  d.config = config;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, slices] : q.weights) names.push_back(name);
  d.config["fp8"] = {{"format", options.format == fp8::Format::kE4M3 ? "e4m3" : "e5m2"},
                     {"block", fp8::kBlock},
                     {"quantized", names},
                     {"weight_bytes_fp32", q.fp32_bytes},
                     {"weight_bytes_fp8", q.fp8_bytes},
                     {"stats", Fp8StatsJson(q.stats)}};
  for (const ParamTensor& t : model.layout().tensors()) {
    Fp8CheckpointTensor out;
    out.name = t.name;
    out.rows = t.shape.size() == 2 ? t.shape[0] : 1;
    out.cols = t.shape.back();
    if (auto it = q.weights.find(t.name); it != q.weights.end()) {
      out.fp8 = std::move(it->second);
    } else {
      const float* p = model.params() + t.offset;
      out.values.assign(p, p + t.size);
    }
    d.tensors.push_back(std::move(out));
  }
  if (summary != nullptr) {
    q.weights.clear();  // moved into the checkpoint
    *summary = std::move(q);
  }
  return d;
}

common::Result<std::unique_ptr<PolicyTransformer>> PolicyFromFp8Checkpoint(
    const Fp8CheckpointData& data, api::EngineOptions* engine) {
  EMBODY_ASSIGN_OR_RETURN(e, EngineOptionsFromCheckpointConfig(data.config));
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(e));
  EMBODY_ASSIGN_OR_RETURN(model, PolicyTransformer::Create(config));
  const ParamLayout& layout = model->layout();
  if (data.tensors.size() != layout.tensors().size()) {
    return common::InvalidArgument("the FP8 checkpoint holds " +
                                   std::to_string(data.tensors.size()) + " tensors, the model " +
                                   std::to_string(layout.tensors().size()));
  }
  std::map<std::string, std::vector<fp8::Fp8Matrix>> weights;
  std::set<std::string> seen;
  for (const Fp8CheckpointTensor& t : data.tensors) {
    const ParamTensor* p = layout.Find(t.name);
    if (p == nullptr || !seen.insert(t.name).second) {
      return common::InvalidArgument("the FP8 checkpoint's tensor \"" + t.name +
                                     "\" is unknown to the model or repeated");
    }
    const int rows = p->shape.size() == 2 ? p->shape[0] : 1;
    if (p->shape.size() > 2 || t.rows != rows || t.cols != p->shape.back()) {
      return common::InvalidArgument(t.name + " has shape (" + std::to_string(t.rows) + ", " +
                                     std::to_string(t.cols) + ") in the FP8 checkpoint");
    }
    if (t.is_fp8()) {
      weights[t.name] = t.fp8;
    } else {
      std::copy(t.values.begin(), t.values.end(), model->params() + p->offset);
    }
  }
  EMBODY_RETURN_IF_ERROR(model->SetFp8Weights(std::move(weights)));
  if (engine != nullptr) *engine = e;
  return model;
}

common::Result<Fp8EvalComparison> CompareFp8Eval(PolicyTransformer& fp32, PolicyTransformer& fp8,
                                                 const api::EngineOptions& e, int num_samples) {
  // Held-out samples of the job's own built-in task (sim:push's for a sim:push job).
  EMBODY_ASSIGN_OR_RETURN(demos,
                          MakeDemoSource(e.data.dataset, e.model.action_dim, e.model.action_horizon,
                                         e.seed, fp32.config().vocab, e.data.demo_noise));
  const DemoSource& task = *demos;
  Fp8EvalComparison c;
  EMBODY_ASSIGN_OR_RETURN(a, EvaluateHeldOut(fp32, task, e, num_samples));
  EMBODY_ASSIGN_OR_RETURN(b, EvaluateHeldOut(fp8, task, e, num_samples));
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.actions.size(); ++i) {
    const double d = static_cast<double>(b.actions[i]) - a.actions[i];
    diff += d * d;
    ref += static_cast<double>(a.actions[i]) * a.actions[i];
  }
  c.relative_l2 = ref > 0.0 ? std::sqrt(diff / ref) : 0.0;
  c.mse_ratio = a.action_mse > 0.0 ? b.action_mse / a.action_mse : 0.0;
  c.fp32 = std::move(a);
  c.fp8 = std::move(b);
  return c;
}

}  // namespace engine
