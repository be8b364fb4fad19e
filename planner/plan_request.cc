#include "planner/plan_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

namespace planner {

using common::InvalidArgument;
using common::Result;
using common::Status;
using nlohmann::json;

namespace {

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// An integer JSON value as int64, unsigned values past INT64_MAX clamped (never wrapped).
int64_t ClampedInt(const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return INT64_MAX;
  }
  return v.get<int64_t>();
}

// One JSON object with known keys; every Get reads an optional field and checks its type and
// range, naming the field on error.
class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status Check(const std::set<std::string>& known) const {
    if (!j_.is_object()) return InvalidArgument("must be an object", path_);
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!known.count(it.key())) return InvalidArgument("unknown field", Join(path_, it.key()));
    }
    return Status::Ok();
  }
  bool Has(const std::string& key) const { return j_.contains(key); }
  const json& At(const std::string& key) const { return j_.at(key); }
  std::string Path(const std::string& key) const { return Join(path_, key); }

  // lo_open: the lower bound itself is refused (a rate of 0).
  Status Number(const std::string& key, double lo, double hi, double* out,
                bool lo_open = false) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number()) return InvalidArgument("must be a number", Path(key));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      return InvalidArgument(std::string("must be ") + (lo_open ? "above " : "between ") +
                                 json(lo).dump() + (lo_open ? " and at most " : " and ") +
                                 json(hi).dump() + ", got " + v.dump(),
                             Path(key));
    }
    *out = x;
    return Status::Ok();
  }
  Status Int(const std::string& key, int lo, int hi, int* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return InvalidArgument("must be an integer", Path(key));
    const int64_t x = ClampedInt(v);
    if (x < lo || x > hi) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             Path(key));
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }
  Status Bool(const std::string& key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    if (!j_.at(key).is_boolean()) return InvalidArgument("must be true or false", Path(key));
    *out = j_.at(key).get<bool>();
    return Status::Ok();
  }
  Status String(const std::string& key, std::string* out) const {
    if (!Has(key)) return Status::Ok();
    if (!j_.at(key).is_string() || j_.at(key).get_ref<const std::string&>().size() > 128) {
      return InvalidArgument("must be a string of at most 128 bytes", Path(key));
    }
    *out = j_.at(key).get<std::string>();
    return Status::Ok();
  }

 private:
  const json& j_;
  std::string path_;
};

Status ParseLink(const Fields& parent, const std::string& key, Link* link) {
  if (!parent.Has(key)) return InvalidArgument("is required", parent.Path(key));
  Fields f(parent.At(key), parent.Path(key));
  EMBODY_RETURN_IF_ERROR(f.Check({"gbps", "latency_us"}));
  if (!f.Has("gbps")) return InvalidArgument("is required", f.Path("gbps"));
  double gbps = 0, latency_us = 0;
  EMBODY_RETURN_IF_ERROR(f.Number("gbps", 0, 1e7, &gbps, /*lo_open=*/true));
  EMBODY_RETURN_IF_ERROR(f.Number("latency_us", 0, 1e7, &latency_us));
  link->bytes_per_s = gbps * 1e9;
  link->latency_s = latency_us * 1e-6;
  return Status::Ok();
}

Status ParseCompute(const Fields& parent, ComputeModel* c) {
  if (!parent.Has("compute")) return InvalidArgument("is required", parent.Path("compute"));
  Fields f(parent.At("compute"), parent.Path("compute"));
  EMBODY_RETURN_IF_ERROR(f.Check({"flops_per_s", "tflops", "efficiency", "half_rate_width",
                                  "bf16_speedup", "fp8_speedup", "memory_gbps"}));
  // Either a measured sustained rate (a CPU, from calibration) or a published peak and the
  // share of it training sustains (a GPU).
  if (f.Has("flops_per_s") == f.Has("tflops")) {
    return InvalidArgument("give exactly one of flops_per_s (measured) or tflops (peak)",
                           f.Path("flops_per_s"));
  }
  if (f.Has("flops_per_s")) {
    if (f.Has("efficiency")) {
      return InvalidArgument("applies to tflops only", f.Path("efficiency"));
    }
    EMBODY_RETURN_IF_ERROR(f.Number("flops_per_s", 0, 1e18, &c->flops_per_s, true));
  } else {
    double tflops = 0, efficiency = 0.4;
    EMBODY_RETURN_IF_ERROR(f.Number("tflops", 0, 1e6, &tflops, true));
    EMBODY_RETURN_IF_ERROR(f.Number("efficiency", 0, 1, &efficiency, true));
    c->flops_per_s = tflops * 1e12 * efficiency;
  }
  EMBODY_RETURN_IF_ERROR(f.Number("half_rate_width", 0, 1e6, &c->half_rate_width));
  EMBODY_RETURN_IF_ERROR(f.Number("bf16_speedup", 0, 1e3, &c->bf16_speedup, true));
  EMBODY_RETURN_IF_ERROR(f.Number("fp8_speedup", 0, 1e3, &c->fp8_speedup, true));
  double memory_gbps = c->memory_bytes_per_s / 1e9;
  EMBODY_RETURN_IF_ERROR(f.Number("memory_gbps", 0, 1e7, &memory_gbps, true));
  c->memory_bytes_per_s = memory_gbps * 1e9;
  return Status::Ok();
}

Status ParseOptions(const json& j, StepOptions* o) {
  Fields f(j, "options");
  EMBODY_RETURN_IF_ERROR(f.Check({"precision", "fp8_allreduce", "bucket_bytes", "overlap"}));
  std::string precision = PrecisionName(o->precision);
  EMBODY_RETURN_IF_ERROR(f.String("precision", &precision));
  if (precision == "fp32") {
    o->precision = Precision::kFp32;
  } else if (precision == "bf16") {
    o->precision = Precision::kBf16;
  } else if (precision == "fp8") {
    o->precision = Precision::kFp8;
  } else {
    return InvalidArgument("must be one of fp32, bf16, fp8", f.Path("precision"));
  }
  EMBODY_RETURN_IF_ERROR(f.Bool("fp8_allreduce", &o->fp8_allreduce));
  EMBODY_RETURN_IF_ERROR(f.Number("bucket_bytes", 65536, 1e12, &o->bucket_bytes));
  EMBODY_RETURN_IF_ERROR(f.Bool("overlap", &o->overlap));
  return Status::Ok();
}

// The step's batch from the job's engine options, then the request's overrides.
Status ParseWorkload(const json* j, const api::JobSpec& job, Workload* w) {
  const api::EngineOptions& e = job.engine;
  const api::ModelOptions& m = e.model;
  w->model.d_model = m.d_model;
  w->model.layers = m.layers;
  w->model.heads = m.heads;
  w->model.mlp = m.mlp;
  w->model.action_dim = m.action_dim;
  w->model.action_horizon = m.action_horizon;
  w->run_steps = e.optim.steps;
  static const json kEmpty = json::object();
  Fields f(j ? *j : kEmpty, "workload");
  EMBODY_RETURN_IF_ERROR(f.Check({"tokens_per_sample", "segment_tokens", "global_samples",
                                  "epoch_samples"}));
  const bool sim = e.data.dataset == "sim:reach";
  if (!sim && !f.Has("tokens_per_sample")) {
    return InvalidArgument("is required for a dataset other than sim:reach (mean tokens of a "
                           "sample, action chunk included)",
                           f.Path("tokens_per_sample"));
  }
  w->tokens_per_sample = kSimReachMeanContextTokens + m.action_horizon;
  EMBODY_RETURN_IF_ERROR(
      f.Number("tokens_per_sample", 0, e.data.tokens_per_row, &w->tokens_per_sample, true));
  w->segment_tokens = w->tokens_per_sample;
  EMBODY_RETURN_IF_ERROR(
      f.Number("segment_tokens", 0, e.data.tokens_per_row, &w->segment_tokens, true));
  if (e.data.packing) {
    // Packing fills rows_per_step rows of tokens_per_row with whole samples.
    w->samples_per_rank = e.data.rows_per_step * e.data.tokens_per_row / w->tokens_per_sample;
    w->slots_per_token = 1.0;
  } else {
    // One sample per row, padded to the step's longest: bounded by the row and, for sim:reach,
    // by its longest sample; the planner charges that bound (an upper estimate).
    w->samples_per_rank = e.data.rows_per_step;
    double longest = e.data.tokens_per_row;
    if (sim) longest = std::min(longest, double(api::kSimReachMaxContextTokens + m.action_horizon));
    w->slots_per_token = std::max(1.0, longest / w->tokens_per_sample);
  }
  EMBODY_RETURN_IF_ERROR(f.Number("global_samples", 0, 1e12, &w->global_samples));
  EMBODY_RETURN_IF_ERROR(f.Number("epoch_samples", 0, 1e15, &w->epoch_samples));
  return Status::Ok();
}

Status Prefixed(const Status& s, const std::string& prefix) {
  if (s.ok()) return s;
  return Status(s.code(), s.message(), s.field().empty() ? prefix : prefix + "." + s.field());
}

}  // namespace

Result<Cluster> ParseCluster(const json& j, const std::string& path) {
  Fields f(j, path);
  EMBODY_RETURN_IF_ERROR(f.Check({"name", "ranks_per_node", "compute", "intra", "inter",
                                  "allreduce", "reader_samples_per_s", "memory_per_rank_gib",
                                  "step_overhead_ms"}));
  Cluster c;
  EMBODY_RETURN_IF_ERROR(f.String("name", &c.name));
  if (!f.Has("ranks_per_node")) return InvalidArgument("is required", f.Path("ranks_per_node"));
  EMBODY_RETURN_IF_ERROR(f.Int("ranks_per_node", 1, 1024, &c.ranks_per_node));
  EMBODY_RETURN_IF_ERROR(ParseCompute(f, &c.compute));
  EMBODY_RETURN_IF_ERROR(ParseLink(f, "intra", &c.intra));
  EMBODY_RETURN_IF_ERROR(ParseLink(f, "inter", &c.inter));
  std::string algorithm = "ring";
  EMBODY_RETURN_IF_ERROR(f.String("allreduce", &algorithm));
  auto a = ParseAllreduceAlgorithm(algorithm);
  if (!a.ok()) return InvalidArgument(a.status().message(), f.Path("allreduce"));
  c.algorithm = *a;
  EMBODY_RETURN_IF_ERROR(f.Number("reader_samples_per_s", 0, 1e12, &c.reader_samples_per_s));
  double gib = 0, overhead_ms = 0;
  EMBODY_RETURN_IF_ERROR(f.Number("memory_per_rank_gib", 0, 1e6, &gib));
  EMBODY_RETURN_IF_ERROR(f.Number("step_overhead_ms", 0, 3.6e6, &overhead_ms));
  c.memory_per_rank_bytes = gib * double(1ull << 30);
  c.step_overhead_s = overhead_ms * 1e-3;
  return c;
}

Result<PlanRequest> ParsePlanRequest(const json& body, const api::SpecLimits& limits) {
  Fields f(body, "");
  if (!body.is_object()) return InvalidArgument("request body must be a JSON object");
  EMBODY_RETURN_IF_ERROR(f.Check({"job", "gpus", "cluster", "options", "workload"}));
  PlanRequest r;
  if (!f.Has("job")) return InvalidArgument("is required", "job");
  // The jobs API's own validation, field names prefixed with "job.". The plan may ask about
  // more ranks than this server would run, so the rank limits are the planner's.
  api::SpecLimits plan_limits = limits;
  plan_limits.max_nodes = kMaxPlanRanks;
  plan_limits.max_ranks = kMaxPlanRanks;
  // The sizes come from "gpus", so a job written only to be planned may leave its resources out.
  json job_json = f.At("job");
  if (job_json.is_object() && !job_json.contains("resources")) {
    job_json["resources"] = {{"nodes", 1}};
  }
  auto job = api::ParseJobSpec(job_json, plan_limits);
  if (!job.ok()) return Prefixed(job.status(), "job");
  r.job = std::move(*job);
  if (r.job.kind != api::JobKind::kTrain) {
    return InvalidArgument("only train jobs can be planned", "job.kind");
  }
  if (!f.Has("gpus")) return InvalidArgument("is required", "gpus");
  const json& gpus = f.At("gpus");
  if (!gpus.is_array() || gpus.empty() || gpus.size() > static_cast<size_t>(kMaxPlanSizes)) {
    return InvalidArgument("must be an array of 1 to " + std::to_string(kMaxPlanSizes) +
                               " rank counts",
                           "gpus");
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    const json& g = gpus[i];
    const std::string path = "gpus[" + std::to_string(i) + "]";
    if (!g.is_number_integer() || ClampedInt(g) < 1 || ClampedInt(g) > kMaxPlanRanks) {
      return InvalidArgument("must be an integer between 1 and " + std::to_string(kMaxPlanRanks),
                             path);
    }
    r.gpus.push_back(static_cast<int>(ClampedInt(g)));
  }
  if (!f.Has("cluster")) return InvalidArgument("is required", "cluster");
  EMBODY_ASSIGN_OR_RETURN(cluster, ParseCluster(f.At("cluster"), "cluster"));
  r.cluster = std::move(cluster);
  if (f.Has("options")) EMBODY_RETURN_IF_ERROR(ParseOptions(f.At("options"), &r.options));
  EMBODY_RETURN_IF_ERROR(
      ParseWorkload(f.Has("workload") ? &f.At("workload") : nullptr, r.job, &r.workload));
  return r;
}

Result<PlanRequest> ParsePlanRequestText(const std::string& body, const api::SpecLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    return InvalidArgument("request body exceeds " + std::to_string(limits.max_body_bytes) +
                           " bytes");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("request body is not valid JSON");
  return ParsePlanRequest(j, limits);
}

api::v1::Plan PlanView(const Plan& plan, const PlanRequest& request) {
  const Workload& w = request.workload;
  api::v1::Plan out;
  out.cluster = request.cluster.name;
  out.allreduce = AllreduceAlgorithmName(request.cluster.algorithm);
  out.precision = PrecisionName(request.options.precision);
  out.fp8_allreduce = request.options.fp8_allreduce;
  out.params = ParamCount(w.model);
  out.flops_per_token = FlopsPerToken(w.model, w.segment_tokens);
  out.tokens_per_sample = w.tokens_per_sample;
  for (const StepPrediction& s : plan.sizes) {
    api::v1::PlanSize size;
    size.gpus = s.ranks;
    size.nodes = (s.ranks + request.cluster.ranks_per_node - 1) / request.cluster.ranks_per_node;
    size.samples_per_rank = s.samples_per_rank;
    size.step_seconds = s.step_s;
    size.compute_seconds = s.compute_s;
    size.allreduce_seconds = s.comm_s;
    size.exposed_allreduce_seconds = s.exposed_comm_s;
    size.data_seconds = s.data_s;
    size.tokens_per_s = s.tokens_per_s;
    size.samples_per_s = s.samples_per_s;
    if (s.epoch_s > 0) size.epoch_seconds = s.epoch_s;
    size.run_seconds = s.run_s;
    size.efficiency = s.efficiency;
    size.bottleneck = BottleneckName(s.bottleneck);
    size.memory_per_rank_bytes = s.memory.total;
    size.memory = {s.memory.params, s.memory.grads, s.memory.optimizer, s.memory.activations};
    size.fits_memory = s.fits_memory;
    out.sizes.push_back(std::move(size));
  }
  out.efficient_up_to_gpus = plan.last_efficient_ranks;
  if (plan.first_inefficient_ranks > 0) {
    out.efficiency_below_half_at_gpus = plan.first_inefficient_ranks;
  }
  return out;
}

json PlanToJson(const Plan& plan, const PlanRequest& request) {
  return api::v1::ToJson(PlanView(plan, request));
}

}  // namespace planner
