#include "api/job_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "api/dataset_ref.h"

namespace api {

using common::Code;
using common::InvalidArgument;
using common::Result;
using common::Status;
using nlohmann::json;

const char* JobKindName(JobKind k) {
  switch (k) {
    case JobKind::kTrain: return "train";
    case JobKind::kRl: return "rl";
    case JobKind::kEval: return "eval";
    case JobKind::kCommand: return "command";
    case JobKind::kImport: return "import";
  }
  return "train";
}

namespace {

std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Walks one JSON object, checking that every key is known. Each Get* reads one optional field
// with a strict type check (no float for an int, no bool for a number).
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status CheckObject() const {
    if (!j_.is_object()) return InvalidArgument("must be an object", path_.empty() ? "" : path_);
    return Status::Ok();
  }

  // Rejects keys outside `known`; keys in `unbuilt` get a clear "not built yet" answer.
  Status CheckKeys(const std::set<std::string>& known,
                   const std::map<std::string, std::string>& unbuilt = {}) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      auto u = unbuilt.find(it.key());
      if (u != unbuilt.end()) {
        return Status(Code::kUnimplemented, u->second, Join(path_, it.key()));
      }
      if (!known.count(it.key())) {
        return InvalidArgument("unknown field", Join(path_, it.key()));
      }
    }
    return Status::Ok();
  }

  bool Has(const std::string& key) const { return j_.contains(key); }
  const json& At(const std::string& key) const { return j_.at(key); }
  std::string PathOf(const std::string& key) const { return Join(path_, key); }

  Status GetInt(const std::string& key, int64_t lo, int64_t hi, int* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return InvalidArgument("must be an integer", PathOf(key));
    int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX
                    ? INT64_MAX
                    : v.get<int64_t>();
    if (x < lo || x > hi) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }

  Status GetInt64(const std::string& key, int64_t lo, int64_t hi, int64_t* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return InvalidArgument("must be an integer", PathOf(key));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return InvalidArgument("must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v.dump(),
                             PathOf(key));
    }
    *out = x;
    return Status::Ok();
  }

  Status GetBool(const std::string& key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_boolean()) return InvalidArgument("must be true or false", PathOf(key));
    *out = v.get<bool>();
    return Status::Ok();
  }

  Status GetUint64(const std::string& key, uint64_t* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() &&
                                    v.get<int64_t>() < 0)) {
      return InvalidArgument("must be a non-negative integer", PathOf(key));
    }
    *out = v.get<uint64_t>();
    return Status::Ok();
  }

  Status GetDouble(const std::string& key, double lo, double hi, double* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_number()) return InvalidArgument("must be a number", PathOf(key));
    double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      return InvalidArgument("must be between " + json(lo).dump() + " and " + json(hi).dump(),
                             PathOf(key));
    }
    *out = x;
    return Status::Ok();
  }

  Status GetString(const std::string& key, const std::set<std::string>& allowed,
                   std::string* out) const {
    if (!Has(key)) return Status::Ok();
    const json& v = j_.at(key);
    if (!v.is_string()) return InvalidArgument("must be a string", PathOf(key));
    std::string s = v.get<std::string>();
    if (!allowed.empty() && !allowed.count(s)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgument("must be one of: " + list + "; got \"" + s + "\"", PathOf(key));
    }
    *out = s;
    return Status::Ok();
  }

 private:
  const json& j_;
  std::string path_;
};

Status ParseResources(const json& j, const SpecLimits& limits, Resources* r) {
  ObjectReader o(j, "resources");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(o.CheckKeys(
      {"nodes", "ranks_per_node", "slot_type", "slots_per_rank", "memory_per_rank_bytes"}));
  EMBODY_RETURN_IF_ERROR(o.GetInt("nodes", 1, limits.max_nodes, &r->nodes));
  EMBODY_RETURN_IF_ERROR(o.GetInt("ranks_per_node", 1, limits.max_ranks, &r->ranks_per_node));
  EMBODY_RETURN_IF_ERROR(o.GetString("slot_type", {"cpu", "gpu"}, &r->slot_type));
  EMBODY_RETURN_IF_ERROR(
      o.GetInt("slots_per_rank", 1, limits.max_slots_per_rank, &r->slots_per_rank));
  EMBODY_RETURN_IF_ERROR(o.GetInt64("memory_per_rank_bytes", 0, kMaxMemoryPerRankBytes,
                                    &r->memory_per_rank_bytes));
  if (r->memory_per_rank_bytes != 0 && r->memory_per_rank_bytes < kMinMemoryPerRankBytes) {
    return InvalidArgument("must be 0 (no limit) or at least " +
                               std::to_string(kMinMemoryPerRankBytes) + " bytes",
                           "resources.memory_per_rank_bytes");
  }
  if (static_cast<int64_t>(r->nodes) * r->ranks_per_node > limits.max_ranks) {
    return InvalidArgument("nodes x ranks_per_node = " +
                               std::to_string(static_cast<int64_t>(r->nodes) * r->ranks_per_node) +
                               " exceeds the per-job maximum of " +
                               std::to_string(limits.max_ranks) + " ranks",
                           "resources.ranks_per_node");
  }
  return Status::Ok();
}

// An obs key list: at most kMaxDatasetKeys names of 1-128 characters of letters, digits, '_',
// '-', '.' and '/'; a bare name gets the "obs/" prefix.
Status GetObsKeys(const ObjectReader& d, const std::string& key, std::vector<std::string>* out) {
  if (!d.Has(key)) return Status::Ok();
  const json& v = d.At(key);
  if (!v.is_array() || v.size() > static_cast<size_t>(kMaxDatasetKeys)) {
    return InvalidArgument("must be an array of at most " + std::to_string(kMaxDatasetKeys) +
                               " obs key names",
                           d.PathOf(key));
  }
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string path = d.PathOf(key) + "[" + std::to_string(i) + "]";
    if (!v[i].is_string()) return InvalidArgument("must be a string", path);
    std::string name = v[i].get<std::string>();
    bool ok = !name.empty() && name.size() <= 128;
    for (char c : name) {
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == '/');
    }
    if (!ok) {
      return InvalidArgument("must be 1-128 characters of letters, digits, '_', '-', '.', '/'",
                             path);
    }
    if (name.rfind("obs/", 0) != 0) name = "obs/" + name;
    for (const auto& seen : *out) {
      if (seen == name) return InvalidArgument("names " + name + " twice", path);
    }
    out->push_back(std::move(name));
  }
  return Status::Ok();
}

Status ParseData(const json& j, DataOptions* data) {
  ObjectReader d(j, "engine.data");
  EMBODY_RETURN_IF_ERROR(d.CheckObject());
  EMBODY_RETURN_IF_ERROR(d.CheckKeys({"dataset", "rows_per_step", "packing", "tokens_per_row",
                                      "cameras", "proprio", "image_size", "language",
                                      "demo_noise"}));
  if (d.Has("dataset")) {
    if (!d.At("dataset").is_string()) {
      return InvalidArgument("must be a string", "engine.data.dataset");
    }
    data->dataset = d.At("dataset").get<std::string>();
  }
  EMBODY_ASSIGN_OR_RETURN(dataset, ParseDatasetRef(data->dataset));
  if (dataset.is_directory()) data->dataset = kDirDatasetPrefix + dataset.path;
  EMBODY_RETURN_IF_ERROR(d.GetInt("rows_per_step", 1, 1 << 20, &data->rows_per_step));
  EMBODY_RETURN_IF_ERROR(d.GetBool("packing", &data->packing));
  EMBODY_RETURN_IF_ERROR(d.GetInt("tokens_per_row", 1, 65536, &data->tokens_per_row));
  for (const char* key : {"cameras", "proprio", "image_size", "language"}) {
    if (d.Has(key) && dataset.is_builtin()) {
      return InvalidArgument("only applies to a \"dir:\" or \"dataset:\" dataset", d.PathOf(key));
    }
  }
  if (d.Has("demo_noise") && data->dataset != "sim:push" && data->dataset != "sim:pick_place") {
    return InvalidArgument("only applies to \"sim:push\" and \"sim:pick_place\"",
                           "engine.data.demo_noise");
  }
  EMBODY_RETURN_IF_ERROR(d.GetDouble("demo_noise", 0.0, 1.0, &data->demo_noise));
  EMBODY_RETURN_IF_ERROR(GetObsKeys(d, "cameras", &data->cameras));
  EMBODY_RETURN_IF_ERROR(GetObsKeys(d, "proprio", &data->proprio));
  EMBODY_RETURN_IF_ERROR(d.GetInt("image_size", kMinImageSize, kMaxImageSize, &data->image_size));
  if (data->image_size % 8 != 0) {
    return InvalidArgument("must be a multiple of 8 (the model's patches are 8x8)",
                           "engine.data.image_size");
  }
  if (d.Has("language")) {
    const json& v = d.At("language");
    if (!v.is_string()) return InvalidArgument("must be a string", "engine.data.language");
    data->language = v.get<std::string>();
    bool ok = data->language.size() <= kMaxLanguageBytes;
    for (unsigned char c : data->language) ok = ok && c >= 0x20 && c != 0x7f;
    if (!ok) {
      return InvalidArgument("must be at most " + std::to_string(kMaxLanguageBytes) +
                                 " bytes without control characters",
                             "engine.data.language");
    }
  }
  return Status::Ok();
}

bool ValidMetricName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] < 'a' || s[0] > 'z') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

Status ParseFp8(const json& j, Fp8Options* fp8) {
  ObjectReader f(j, "engine.fp8");
  EMBODY_RETURN_IF_ERROR(f.CheckObject());
  EMBODY_RETURN_IF_ERROR(
      f.CheckKeys({"inference", "format", "allreduce", "compute", "scaling", "amax_history"}));
  EMBODY_RETURN_IF_ERROR(f.GetBool("inference", &fp8->inference));
  // E5M2's 2 mantissa bits cost weights accuracy for a range block scaling makes unnecessary.
  EMBODY_RETURN_IF_ERROR(f.GetString("format", {"e4m3"}, &fp8->format));
  // allreduce: E4M3 on the wire with error feedback (engine/dist/fp8_allreduce.h); its format is
  // fixed, so "format" still applies only to inference.
  EMBODY_RETURN_IF_ERROR(f.GetBool("allreduce", &fp8->allreduce));
  // compute: the blocks' Linear products in FP8 (engine/model/fp8_linear.h); scaling and its
  // history length only mean something with it.
  EMBODY_RETURN_IF_ERROR(f.GetBool("compute", &fp8->compute));
  EMBODY_RETURN_IF_ERROR(f.GetString("scaling", {"block", "delayed"}, &fp8->scaling));
  EMBODY_RETURN_IF_ERROR(f.GetInt("amax_history", 1, 1024, &fp8->amax_history));
  if (f.Has("scaling") && !fp8->compute) {
    return InvalidArgument("applies only with \"compute\": true", "engine.fp8.scaling");
  }
  if (f.Has("amax_history") && fp8->scaling != "delayed") {
    return InvalidArgument("applies only with \"scaling\": \"delayed\"",
                           "engine.fp8.amax_history");
  }
  if (f.Has("format") && !fp8->inference) {
    return InvalidArgument("applies only with \"inference\": true", "engine.fp8.format");
  }
  return Status::Ok();
}

// engine.rl's latency model and asynchronous levels: each level is on when its object is there.
Status ParseRlAsync(const ObjectReader& o, RlOptions* r) {
  if (o.Has("env_latency")) {
    ObjectReader l(o.At("env_latency"), "engine.rl.env_latency");
    RlLatencyOptions& m = r->env_latency;
    EMBODY_RETURN_IF_ERROR(l.CheckObject());
    EMBODY_RETURN_IF_ERROR(
        l.CheckKeys({"mean_ms", "jitter", "tail_probability", "tail_alpha", "tail_scale", "busy"}));
    // The bounds of engine/sim/step_latency.h, so the model accepts whatever passes here.
    EMBODY_RETURN_IF_ERROR(l.GetDouble("mean_ms", 0.0, 60000.0, &m.mean_ms));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("jitter", 0.0, 10.0, &m.jitter));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_probability", 0.0, 0.999, &m.tail_probability));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_alpha", 1.001, 100.0, &m.tail_alpha));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_scale", 1.0, 1000.0, &m.tail_scale));
    EMBODY_RETURN_IF_ERROR(l.GetBool("busy", &m.busy));
  }
  if (o.Has("disaggregated")) {
    ObjectReader d(o.At("disaggregated"), "engine.rl.disaggregated");
    EMBODY_RETURN_IF_ERROR(d.CheckObject());
    EMBODY_RETURN_IF_ERROR(
        d.CheckKeys({"max_staleness", "proximal", "stale_lr_scale", "rollout_ranks"}));
    r->disaggregated = true;
    EMBODY_RETURN_IF_ERROR(d.GetInt("max_staleness", 0, 64, &r->max_staleness));
    EMBODY_RETURN_IF_ERROR(d.GetInt("rollout_ranks", 0, 1 << 20, &r->rollout_ranks));
    EMBODY_RETURN_IF_ERROR(d.GetString("proximal", {"behaviour", "current"}, &r->proximal));
    EMBODY_RETURN_IF_ERROR(d.GetDouble("stale_lr_scale", 0.01, 1.0, &r->stale_lr_scale));
  }
  if (o.Has("env_async")) {
    ObjectReader a(o.At("env_async"), "engine.rl.env_async");
    EMBODY_RETURN_IF_ERROR(a.CheckObject());
    EMBODY_RETURN_IF_ERROR(a.CheckKeys({"max_batch", "max_wait_ms"}));
    r->env_async = true;
    EMBODY_RETURN_IF_ERROR(a.GetInt("max_batch", 0, r->envs, &r->max_batch));
    EMBODY_RETURN_IF_ERROR(a.GetDouble("max_wait_ms", 0.0, 10000.0, &r->max_wait_ms));
  }
  if (o.Has("streaming")) {
    ObjectReader m(o.At("streaming"), "engine.rl.streaming");
    EMBODY_RETURN_IF_ERROR(m.CheckObject());
    EMBODY_RETURN_IF_ERROR(m.CheckKeys({"micro_batches"}));
    r->streaming = true;
    EMBODY_RETURN_IF_ERROR(m.GetInt("micro_batches", 1, r->envs, &r->micro_batches));
    // Streaming overlaps the learner with acting, which only a disaggregated learner does.
    if (!r->disaggregated) {
      return InvalidArgument("needs engine.rl.disaggregated", "engine.rl.streaming");
    }
  }
  return Status::Ok();
}

Status ParseRl(const json& j, RlOptions* r) {
  ObjectReader o(j, "engine.rl");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(o.CheckKeys(
      {"task", "envs", "rollout_steps", "total_env_steps", "episode_steps", "success_radius",
       "cameras", "gamma", "gae_lambda", "clip", "value_clip", "value_coef", "entropy_coef",
       "epochs", "minibatches", "lr", "max_grad_norm", "init_log_std", "importance_cap",
       "env_latency", "disaggregated", "env_async", "streaming"}));
  EMBODY_RETURN_IF_ERROR(o.GetString("task", {"reach", "push", "pick_place"}, &r->task));
  EMBODY_RETURN_IF_ERROR(o.GetInt("envs", 1, 4096, &r->envs));
  EMBODY_RETURN_IF_ERROR(o.GetInt("rollout_steps", 1, 4096, &r->rollout_steps));
  EMBODY_RETURN_IF_ERROR(
      o.GetInt64("total_env_steps", 1, 1'000'000'000'000LL, &r->total_env_steps));
  EMBODY_RETURN_IF_ERROR(o.GetInt("episode_steps", 1, 100000, &r->episode_steps));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("success_radius", 1e-3, 1.0, &r->success_radius));
  EMBODY_RETURN_IF_ERROR(o.GetInt("cameras", 0, 3, &r->cameras));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("gamma", 0.0, 1.0, &r->gamma));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("gae_lambda", 0.0, 1.0, &r->gae_lambda));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("clip", 1e-3, 1.0, &r->clip));
  EMBODY_RETURN_IF_ERROR(o.GetBool("value_clip", &r->value_clip));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("value_coef", 0.0, 100.0, &r->value_coef));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("entropy_coef", 0.0, 1.0, &r->entropy_coef));
  EMBODY_RETURN_IF_ERROR(o.GetInt("epochs", 1, 100, &r->epochs));
  EMBODY_RETURN_IF_ERROR(o.GetInt("minibatches", 1, 4096, &r->minibatches));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("lr", 1e-7, 1.0, &r->lr));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("max_grad_norm", 0.0, 1e6, &r->max_grad_norm));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("init_log_std", -5.0, 2.0, &r->init_log_std));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("importance_cap", 1.0, 100.0, &r->importance_cap));
  // Every minibatch must hold at least one step of this rank's rollout.
  if (static_cast<int64_t>(r->minibatches) > static_cast<int64_t>(r->envs) * r->rollout_steps) {
    return InvalidArgument("must not exceed envs × rollout_steps (" +
                               std::to_string(static_cast<int64_t>(r->envs) * r->rollout_steps) +
                               ")",
                           "engine.rl.minibatches");
  }
  return ParseRlAsync(o, r);
}

Status ParseEngine(const json& j, const SpecLimits& limits, EngineOptions* e) {
  ObjectReader o(j, "engine");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(
      o.CheckKeys({"model", "data", "attention", "precision", "optim", "checkpoint", "seed", "fp8",
                   "rl", "eval_every", "eval_episodes"}));
  if (o.Has("rl")) EMBODY_RETURN_IF_ERROR(ParseRl(o.At("rl"), &e->rl));
  if (o.Has("fp8")) EMBODY_RETURN_IF_ERROR(ParseFp8(o.At("fp8"), &e->fp8));
  EMBODY_RETURN_IF_ERROR(o.GetUint64("seed", &e->seed));
  EMBODY_RETURN_IF_ERROR(o.GetInt("eval_every", 0, limits.max_steps, &e->eval_every));
  EMBODY_RETURN_IF_ERROR(o.GetInt("eval_episodes", 1, kMaxEvalEpisodes, &e->eval_episodes));
  EMBODY_RETURN_IF_ERROR(o.GetString("attention", {"varlen", "padded"}, &e->attention));
  EMBODY_RETURN_IF_ERROR(o.GetString("precision", {"fp32", "bf16"}, &e->precision));
  // Both choose how the products round their operands; the fp8 products have no bf16 variant.
  if (e->fp8.compute && e->precision != "fp32") {
    return InvalidArgument("cannot be combined with engine.precision \"" + e->precision +
                               "\" (FP8 compute sets the products' precision itself)",
                           "engine.fp8.compute");
  }
  if (o.Has("model")) {
    ObjectReader m(o.At("model"), "engine.model");
    EMBODY_RETURN_IF_ERROR(m.CheckObject());
    EMBODY_RETURN_IF_ERROR(m.CheckKeys(
        {"d_model", "layers", "heads", "mlp", "action_horizon", "action_dim", "action_head",
         "inference_steps"}));
    EMBODY_RETURN_IF_ERROR(m.GetInt("d_model", 8, 4096, &e->model.d_model));
    if (!m.Has("mlp")) e->model.mlp = 4 * e->model.d_model;
    EMBODY_RETURN_IF_ERROR(m.GetInt("layers", 1, 64, &e->model.layers));
    EMBODY_RETURN_IF_ERROR(m.GetInt("heads", 1, 256, &e->model.heads));
    EMBODY_RETURN_IF_ERROR(m.GetInt("mlp", 1, 65536, &e->model.mlp));
    EMBODY_RETURN_IF_ERROR(m.GetInt("action_horizon", 1, 256, &e->model.action_horizon));
    EMBODY_RETURN_IF_ERROR(m.GetInt("action_dim", 1, 64, &e->model.action_dim));
    if (m.Has("action_head") && m.At("action_head") == "gaussian") {
      return Status(Code::kUnimplemented,
                    "the Gaussian action head arrives with reinforcement learning; not available "
                    "yet (use \"flow\")",
                    "engine.model.action_head");
    }
    EMBODY_RETURN_IF_ERROR(m.GetString("action_head", {"flow"}, &e->model.action_head));
    EMBODY_RETURN_IF_ERROR(m.GetInt("inference_steps", 1, 1000, &e->model.inference_steps));
  }
  const ModelOptions& mo = e->model;
  if (mo.d_model % mo.heads != 0) {
    return InvalidArgument("heads (" + std::to_string(mo.heads) + ") must divide d_model (" +
                               std::to_string(mo.d_model) + ")",
                           "engine.model.heads");
  }
  if (mo.d_model / mo.heads > kMaxHeadDim) {
    return InvalidArgument("head dim d_model/heads = " + std::to_string(mo.d_model / mo.heads) +
                               " exceeds " + std::to_string(kMaxHeadDim) + "; use more heads",
                           "engine.model.heads");
  }
  if (o.Has("data")) EMBODY_RETURN_IF_ERROR(ParseData(o.At("data"), &e->data));
  EMBODY_ASSIGN_OR_RETURN(dataset, ParseDatasetRef(e->data.dataset));
  if (dataset.is_builtin()) {
    // The built-in streams' longest sample (one length distribution for every sim: task) is
    // known here; a dataset's (a directory, or a stored one launched as its directory) is
    // checked by the engine against the dataset's own token counts when it opens it.
    const int longest_sample = kSimReachMaxContextTokens + mo.action_horizon;
    if (longest_sample > kMaxPositions) {
      return InvalidArgument("samples of up to " + std::to_string(kSimReachMaxContextTokens) +
                                 " context tokens plus the action chunk exceed the model's " +
                                 std::to_string(kMaxPositions) + " positions; at most " +
                                 std::to_string(kMaxPositions - kSimReachMaxContextTokens) +
                                 " actions",
                             "engine.model.action_horizon");
    }
    if (e->data.tokens_per_row < longest_sample) {
      return InvalidArgument("must hold the longest sample: " +
                                 std::to_string(kSimReachMaxContextTokens) + " context + " +
                                 std::to_string(mo.action_horizon) + " action tokens = " +
                                 std::to_string(longest_sample) + ", got " +
                                 std::to_string(e->data.tokens_per_row),
                             "engine.data.tokens_per_row");
    }
  } else if (mo.action_horizon + 1 > kMaxPositions) {
    return InvalidArgument("the action chunk alone exceeds the model's " +
                               std::to_string(kMaxPositions) + " positions",
                           "engine.model.action_horizon");
  }
  if (e->attention == "padded" && e->data.packing) {
    return InvalidArgument(
        "padded attention cannot keep packed samples apart; set engine.data.packing to false "
        "or use \"varlen\"",
        "engine.attention");
  }
  if (o.Has("optim")) {
    ObjectReader p(o.At("optim"), "engine.optim");
    EMBODY_RETURN_IF_ERROR(p.CheckObject());
    EMBODY_RETURN_IF_ERROR(p.CheckKeys({"lr", "steps", "warmup_steps", "weight_decay"}));
    EMBODY_RETURN_IF_ERROR(p.GetDouble("lr", 1e-12, 10.0, &e->optim.lr));
    EMBODY_RETURN_IF_ERROR(p.GetInt("steps", 1, limits.max_steps, &e->optim.steps));
    EMBODY_RETURN_IF_ERROR(p.GetInt("warmup_steps", 0, limits.max_steps, &e->optim.warmup_steps));
    EMBODY_RETURN_IF_ERROR(p.GetDouble("weight_decay", 0.0, 1.0, &e->optim.weight_decay));
  }
  if (o.Has("checkpoint")) {
    ObjectReader c(o.At("checkpoint"), "engine.checkpoint");
    EMBODY_RETURN_IF_ERROR(c.CheckObject());
    EMBODY_RETURN_IF_ERROR(c.CheckKeys({"every_steps", "keep", "best"}));
    EMBODY_RETURN_IF_ERROR(c.GetInt("every_steps", 0, limits.max_steps, &e->checkpoint.every_steps));
    EMBODY_RETURN_IF_ERROR(c.GetInt("keep", 1, 1000, &e->checkpoint.keep));
    if (c.Has("best")) {
      ObjectReader b(c.At("best"), "engine.checkpoint.best");
      EMBODY_RETURN_IF_ERROR(b.CheckObject());
      EMBODY_RETURN_IF_ERROR(b.CheckKeys({"metric", "mode"}));
      if (!b.Has("metric")) return InvalidArgument("is required", "engine.checkpoint.best.metric");
      const json& m = b.At("metric");
      if (!m.is_string() || !ValidMetricName(m.get<std::string>())) {
        return InvalidArgument("must be 1-64 characters of a-z, 0-9 and '_', starting with a letter",
                               "engine.checkpoint.best.metric");
      }
      e->checkpoint.best_metric = m.get<std::string>();
      EMBODY_RETURN_IF_ERROR(b.GetString("mode", {"min", "max"}, &e->checkpoint.best_mode));
    }
  }
  // Evaluation runs the built-in task the job trains on; a dataset directory names none.
  if (e->eval_every > 0 && !o.Has("rl") && !dataset.is_builtin()) {
    return InvalidArgument("evaluation during training needs a built-in sim: dataset (its task)",
                           "engine.eval_every");
  }
  // The table-top tasks act in (dx, dy, dz, grip) or robomimic's 7+ layout (engine/sim/table_env.h).
  if (o.Has("rl") && e->rl.task != "reach" && e->model.action_dim != 4 &&
      e->model.action_dim < 7) {
    return InvalidArgument("the task " + e->rl.task + " needs 4 (dx, dy, dz, grip) or at least 7",
                           "engine.model.action_dim");
  }
  return Status::Ok();
}

bool ValidName(const std::string& s) { return IsValidName(s); }

// Kind import: {"dataset_id": N, "source": {...}} (made by the server, checked all the same).
Status ParseImport(const json& j, JobSpec* spec) {
  ObjectReader o(j, "import");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(o.CheckKeys({"dataset_id", "source"}));
  if (!o.Has("dataset_id")) return InvalidArgument("is required", "import.dataset_id");
  EMBODY_RETURN_IF_ERROR(o.GetInt64("dataset_id", 1, INT64_MAX, &spec->import_dataset_id));
  if (!o.Has("source")) return InvalidArgument("is required", "import.source");
  EMBODY_ASSIGN_OR_RETURN(source, ParseImportSource(o.At("source"), "import.source",
                                                    ImportSourceFrom::kServer));
  spec->import_source = std::move(source);
  return Status::Ok();
}

// Kind eval: {"checkpoint_from_job" | "checkpoint", "tasks", "episodes", "seed", "fp8"}.
Status ParseEval(const json& j, EvalOptions* ev) {
  ObjectReader o(j, "eval");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(
      o.CheckKeys({"checkpoint_from_job", "checkpoint", "tasks", "episodes", "seed", "fp8"}));
  EMBODY_RETURN_IF_ERROR(o.GetInt64("checkpoint_from_job", 1, INT64_MAX, &ev->checkpoint_from_job));
  EMBODY_RETURN_IF_ERROR(o.GetInt64("checkpoint", 1, INT64_MAX, &ev->checkpoint));
  if ((ev->checkpoint_from_job != 0) == (ev->checkpoint != 0)) {
    return InvalidArgument("give exactly one of checkpoint_from_job (a job id) and checkpoint "
                           "(a checkpoint id)",
                           ev->checkpoint != 0 ? "eval.checkpoint" : "eval.checkpoint_from_job");
  }
  if (o.Has("tasks")) {
    const json& t = o.At("tasks");
    if (!t.is_array() || t.empty() || t.size() > 3) {
      return InvalidArgument("must be a non-empty array of at most 3 task names", "eval.tasks");
    }
    ev->tasks.clear();
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string at = "eval.tasks[" + std::to_string(i) + "]";
      if (!t[i].is_string()) return InvalidArgument("must be a string", at);
      const std::string name = t[i].get<std::string>();
      if (name != "reach" && name != "push" && name != "pick_place") {
        return InvalidArgument("must be one of reach, push, pick_place", at);
      }
      if (std::find(ev->tasks.begin(), ev->tasks.end(), name) != ev->tasks.end()) {
        return InvalidArgument("names " + name + " twice", at);
      }
      ev->tasks.push_back(name);
    }
  }
  EMBODY_RETURN_IF_ERROR(o.GetInt("episodes", 1, kMaxEvalEpisodes, &ev->episodes));
  EMBODY_RETURN_IF_ERROR(o.GetUint64("seed", &ev->seed));
  EMBODY_RETURN_IF_ERROR(o.GetBool("fp8", &ev->fp8));
  return Status::Ok();
}

// Kind command's "datasets": stored datasets only (a "dir:" path needs no binding: the job
// opens it where it runs), each version named once.
Status ParseCommandDatasets(const ObjectReader& o, std::vector<std::string>* out) {
  if (!o.Has("datasets")) return Status::Ok();
  const json& v = o.At("datasets");
  if (!v.is_array() || v.size() > static_cast<size_t>(kMaxCommandDatasets)) {
    return InvalidArgument("must be an array of at most " + std::to_string(kMaxCommandDatasets) +
                               " \"dataset:NAME[@VERSION]\" strings",
                           "datasets");
  }
  std::set<std::pair<std::string, int>> seen;  // (name, version; 0: the newest ready one)
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "datasets[" + std::to_string(i) + "]";
    if (!v[i].is_string()) return InvalidArgument("must be a string", field);
    EMBODY_ASSIGN_OR_RETURN(ref, ParseDatasetRef(v[i].get<std::string>(), field));
    if (!ref.is_stored()) {
      return InvalidArgument("must name a stored dataset, \"dataset:NAME[@VERSION]\" (a dir: "
                             "path needs no binding: open it as dir:PATH)",
                             field);
    }
    if (!seen.insert({ref.name, ref.version.value_or(0)}).second) {
      return InvalidArgument("names " + v[i].get<std::string>() + " twice", field);
    }
    out->push_back(kDatasetRefPrefix + ref.name +
                   (ref.version ? "@" + std::to_string(*ref.version) : ""));
  }
  return Status::Ok();
}

// Kind command's "environment": a virtualenv by path, or a stored OCI image by name.
Status ParseEnvironment(const ObjectReader& o, std::string* python_env, std::string* image) {
  if (!o.Has("environment")) return Status::Ok();
  ObjectReader e(o.At("environment"), "environment");
  EMBODY_RETURN_IF_ERROR(e.CheckObject());
  EMBODY_RETURN_IF_ERROR(e.CheckKeys({"python", "image"}, {}));
  if (e.Has("python") == e.Has("image")) {
    return InvalidArgument(
        "needs exactly one of \"python\" (a virtualenv's absolute path) and \"image\" (a "
        "stored OCI image, NAME[@VERSION])",
        e.Has("python") ? "environment.image" : "environment.python");
  }
  if (e.Has("image")) {
    if (!e.At("image").is_string()) return InvalidArgument("must be a string", "environment.image");
    const std::string text = e.At("image").get<std::string>();
    EMBODY_ASSIGN_OR_RETURN(ref,
                            ParseDatasetRef(kDatasetRefPrefix + text, "environment.image"));
    if (!ref.is_stored() || text.find(':') != std::string::npos) {
      return InvalidArgument("must be NAME[@VERSION] of a stored image (`embody datasets upload "
                             "NAME FILE.tar --format oci`, or `embody datasets pull NAME "
                             "REGISTRY/REPOSITORY:TAG`)",
                             "environment.image");
    }
    *image = ref.name + (ref.version ? "@" + std::to_string(*ref.version) : "");
    return Status::Ok();
  }
  if (!e.At("python").is_string()) return InvalidArgument("must be a string", "environment.python");
  EMBODY_ASSIGN_OR_RETURN(path, ParsePythonEnvironment(e.At("python").get<std::string>(),
                                                       "environment.python"));
  *python_env = std::move(path);
  return Status::Ok();
}

// Which engine blocks a kind uses: "rl" needs engine.rl and has no dataset, optimizer schedule,
// FP8 or checkpoint schedule (its optimiser settings are in engine.rl; it writes no checkpoints
// yet); "train" has no engine.rl.
Status CheckEngineForKind(JobKind kind, const ObjectReader& spec) {
  const bool has_engine = spec.Has("engine") && spec.At("engine").is_object();
  auto has = [&](const char* key) { return has_engine && spec.At("engine").contains(key); };
  if (kind == JobKind::kRl) {
    if (!has("rl")) return InvalidArgument("is required for kind \"rl\"", "engine.rl");
    for (const char* unused : {"data", "optim", "fp8", "checkpoint"}) {
      if (has(unused)) {
        return InvalidArgument(std::string("not used by kind \"rl\"") +
                                   (std::string(unused) == "optim" ? " (see engine.rl: lr, ...)"
                                                                   : ""),
                               std::string("engine.") + unused);
      }
    }
  } else if (has("rl")) {
    return InvalidArgument("only allowed for kind \"rl\"", "engine.rl");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ParsePythonEnvironment(const std::string& path, const std::string& field) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty() || p[0] != '/' || p.size() > 4096) {
    return InvalidArgument("must be an absolute path of at most 4096 bytes", field);
  }
  for (unsigned char c : p) {
    if (c < 0x20 || c == 0x7f || c == ':') {
      return InvalidArgument("must not hold ':' or control characters", field);
    }
  }
  // Components between slashes: "." and ".." would make the path mean another directory than
  // the one it names.
  for (size_t begin = 1; begin <= p.size();) {
    size_t end = p.find('/', begin);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(begin, end - begin);
    if (part == "." || part == "..") {
      return InvalidArgument("must not hold \".\" or \"..\" components", field);
    }
    begin = end + 1;
  }
  if (p == "/") return InvalidArgument("must name a virtualenv directory, not /", field);
  return p;
}

Result<JobSpec> ParseJobSpec(const json& j, const SpecLimits& limits) {
  JobSpec spec;
  ObjectReader o(j, "");
  if (!j.is_object()) return InvalidArgument("the job spec must be a JSON object");
  EMBODY_RETURN_IF_ERROR(o.CheckKeys(
      {"name", "kind", "resources", "priority", "max_restarts", "time_limit_seconds", "engine",
       "command", "init_from", "import", "eval", "datasets", "launcher", "environment"}));

  if (!o.Has("name")) return InvalidArgument("is required", "name");
  if (!o.At("name").is_string()) return InvalidArgument("must be a string", "name");
  spec.name = o.At("name").get<std::string>();
  if (!ValidName(spec.name)) {
    return InvalidArgument("must be 1-128 characters of letters, digits, '-', '_' or '.'", "name");
  }

  if (!o.Has("kind")) return InvalidArgument("is required", "kind");
  std::string kind;
  EMBODY_RETURN_IF_ERROR(o.GetString("kind", {"train", "rl", "eval", "command", "import"}, &kind));
  spec.kind = kind == "train"    ? JobKind::kTrain
              : kind == "rl"     ? JobKind::kRl
              : kind == "eval"   ? JobKind::kEval
              : kind == "import" ? JobKind::kImport
                                 : JobKind::kCommand;
  if (spec.kind != JobKind::kImport && o.Has("import")) {
    return InvalidArgument("only allowed for kind \"import\"", "import");
  }
  if (spec.kind != JobKind::kEval && o.Has("eval")) {
    return InvalidArgument("only allowed for kind \"eval\"", "eval");
  }
  if (spec.kind != JobKind::kCommand) {
    if (o.Has("datasets")) {
      return InvalidArgument("only allowed for kind \"command\"" +
                                 std::string(spec.kind == JobKind::kTrain
                                                 ? " (a train job names engine.data.dataset)"
                                                 : ""),
                             "datasets");
    }
    if (o.Has("launcher")) {
      return InvalidArgument("only allowed for kind \"command\"", "launcher");
    }
    if (o.Has("environment")) {
      return InvalidArgument("only allowed for kind \"command\"", "environment");
    }
  }

  if (!o.Has("resources")) return InvalidArgument("is required", "resources");
  EMBODY_RETURN_IF_ERROR(ParseResources(o.At("resources"), limits, &spec.resources));
  EMBODY_RETURN_IF_ERROR(o.GetInt("priority", 0, 100, &spec.priority));
  EMBODY_RETURN_IF_ERROR(o.GetInt("max_restarts", 0, 100, &spec.max_restarts));
  EMBODY_RETURN_IF_ERROR(
      o.GetInt64("time_limit_seconds", 0, kMaxTimeLimitSeconds, &spec.time_limit_seconds));
  // Whether it names a checkpoint of the submitter's tenant is the server's check (404).
  EMBODY_RETURN_IF_ERROR(o.GetInt64("init_from", 0, INT64_MAX, &spec.init_from));

  if (spec.kind == JobKind::kEval) {
    // The model, its shape and options come from the checkpoint; init_from is where the server
    // puts the checkpoint it resolved (a client's own init_from is refused at submit).
    if (o.Has("engine")) {
      return InvalidArgument("not allowed for kind \"eval\" (the checkpoint brings its model)",
                             "engine");
    }
    if (o.Has("command")) return InvalidArgument("not allowed for kind \"eval\"", "command");
    if (!o.Has("eval")) return InvalidArgument("is required for kind \"eval\"", "eval");
    EMBODY_RETURN_IF_ERROR(ParseEval(o.At("eval"), &spec.eval));
    if (spec.resources.TotalRanks() != 1) {
      return InvalidArgument("an eval job runs on one rank (nodes 1, ranks_per_node 1)",
                             "resources.ranks_per_node");
    }
  } else if (spec.kind == JobKind::kImport) {
    if (o.Has("engine")) return InvalidArgument("not allowed for kind \"import\"", "engine");
    if (o.Has("command")) return InvalidArgument("not allowed for kind \"import\"", "command");
    if (spec.init_from != 0) {
      return InvalidArgument("not allowed for kind \"import\"", "init_from");
    }
    if (!o.Has("import")) return InvalidArgument("is required for kind \"import\"", "import");
    EMBODY_RETURN_IF_ERROR(ParseImport(o.At("import"), &spec));
  } else if (spec.kind == JobKind::kCommand) {
    if (o.Has("engine")) return InvalidArgument("not allowed for kind \"command\"", "engine");
    if (!o.Has("command")) return InvalidArgument("is required for kind \"command\"", "command");
    const json& c = o.At("command");
    if (!c.is_array() || c.empty() || c.size() > 256) {
      return InvalidArgument("must be a non-empty array of at most 256 strings", "command");
    }
    for (size_t i = 0; i < c.size(); ++i) {
      // An argv entry is a C string: a NUL would cut it short (and PostgreSQL's jsonb refuses
      // \u0000 outright).
      if (!c[i].is_string() || c[i].get<std::string>().empty() ||
          c[i].get<std::string>().size() > 4096 ||
          c[i].get<std::string>().find('\0') != std::string::npos) {
        return InvalidArgument("must be a non-empty string of at most 4096 bytes, without NUL",
                               "command[" + std::to_string(i) + "]");
      }
      spec.command.push_back(c[i].get<std::string>());
    }
    EMBODY_RETURN_IF_ERROR(ParseCommandDatasets(o, &spec.datasets));
    EMBODY_RETURN_IF_ERROR(
        o.GetString("launcher", {"mpirun", "torchrun", "direct"}, &spec.launcher));
    if (spec.launcher == "direct" && spec.resources.nodes != 1) {
      return InvalidArgument("\"direct\" starts the ranks of one node: resources.nodes must be 1",
                             "launcher");
    }
    EMBODY_RETURN_IF_ERROR(ParseEnvironment(o, &spec.python_env, &spec.image));
    if (!spec.image.empty() && spec.resources.slot_type == "gpu") {
      // Refused rather than started blind: nccl would find no device in the container.
      return InvalidArgument(
          "GPU jobs cannot run in an image yet (the NVIDIA devices and driver libraries are not "
          "mounted into it): use slot_type \"cpu\", or \"environment\": {\"python\": VENV}",
          "environment.image");
    }
  } else {
    if (o.Has("command")) return InvalidArgument("only allowed for kind \"command\"", "command");
    if (o.Has("engine")) EMBODY_RETURN_IF_ERROR(ParseEngine(o.At("engine"), limits, &spec.engine));
    EMBODY_RETURN_IF_ERROR(CheckEngineForKind(spec.kind, o));
    if (const int R = spec.engine.rl.rollout_ranks; R > 0) {
      // The engine checks the same against the world it runs in (engine/rl/rollout_ranks.h).
      const int W = spec.resources.TotalRanks(), learners = W - R;
      if (learners < 1 || R % learners != 0) {
        return InvalidArgument("must be below the job's ranks (" + std::to_string(W) +
                                   ") and a multiple of the learner ranks left (ranks − "
                                   "rollout_ranks)",
                               "engine.rl.disaggregated.rollout_ranks");
      }
    }
    if (spec.engine.optim.warmup_steps > spec.engine.optim.steps) {
      return InvalidArgument("must not exceed engine.optim.steps", "engine.optim.warmup_steps");
    }
  }
  return spec;
}

Result<JobSpec> ParseJobSpecText(const std::string& body, const SpecLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    return InvalidArgument("request body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(limits.max_body_bytes));
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("request body is not valid JSON");
  return ParseJobSpec(j, limits);
}

namespace {

json DataJson(const DataOptions& d) {
  json j = {{"dataset", d.dataset},
            {"rows_per_step", d.rows_per_step},
            {"packing", d.packing},
            {"tokens_per_row", d.tokens_per_row}};
  // Written only when set, so specs (and checkpoints) of the default stream read as before.
  if (d.demo_noise != kDefaultDemoNoise) j["demo_noise"] = d.demo_noise;
  // The dataset options exist only for a dataset directory or a stored dataset (launched as its
  // directory); ParseData refuses them with the built-in stream.
  if (!IsBuiltinDataset(d.dataset)) {
    j["cameras"] = d.cameras;
    j["proprio"] = d.proprio;
    j["image_size"] = d.image_size;
    j["language"] = d.language;
  }
  return j;
}

}  // namespace

json ToJson(const JobSpec& s) {
  json j;
  j["name"] = s.name;
  j["kind"] = JobKindName(s.kind);
  j["resources"] = {{"nodes", s.resources.nodes},
                    {"ranks_per_node", s.resources.ranks_per_node},
                    {"slot_type", s.resources.slot_type},
                    {"slots_per_rank", s.resources.slots_per_rank},
                    {"memory_per_rank_bytes", s.resources.memory_per_rank_bytes}};
  j["priority"] = s.priority;
  j["max_restarts"] = s.max_restarts;
  j["time_limit_seconds"] = s.time_limit_seconds;
  if (s.init_from != 0) j["init_from"] = s.init_from;
  if (s.kind == JobKind::kEval) {
    const EvalOptions& ev = s.eval;
    j["eval"] = {{"tasks", ev.tasks}, {"episodes", ev.episodes}, {"seed", ev.seed},
                 {"fp8", ev.fp8}};
    if (ev.checkpoint_from_job != 0) j["eval"]["checkpoint_from_job"] = ev.checkpoint_from_job;
    if (ev.checkpoint != 0) j["eval"]["checkpoint"] = ev.checkpoint;
  } else if (s.kind == JobKind::kImport) {
    j["import"] = {{"dataset_id", s.import_dataset_id}, {"source", ToJson(s.import_source)}};
  } else if (s.kind == JobKind::kCommand) {
    j["command"] = s.command;
    // Only when given, so specs stored before these existed read back the same.
    if (!s.datasets.empty()) j["datasets"] = s.datasets;
    if (s.launcher != "mpirun") j["launcher"] = s.launcher;
    if (!s.python_env.empty()) j["environment"] = {{"python", s.python_env}};
    if (!s.image.empty()) j["environment"] = {{"image", s.image}};
  } else {
    const EngineOptions& e = s.engine;
    j["engine"] = {
        {"model",
         {{"d_model", e.model.d_model},
          {"layers", e.model.layers},
          {"heads", e.model.heads},
          {"mlp", e.model.mlp},
          {"action_horizon", e.model.action_horizon},
          {"action_dim", e.model.action_dim},
          {"action_head", e.model.action_head},
          {"inference_steps", e.model.inference_steps}}},
        {"data", DataJson(e.data)},
        {"attention", e.attention},
        {"optim",
         {{"lr", e.optim.lr},
          {"steps", e.optim.steps},
          {"warmup_steps", e.optim.warmup_steps},
          {"weight_decay", e.optim.weight_decay}}},
        {"checkpoint", {{"every_steps", e.checkpoint.every_steps}, {"keep", e.checkpoint.keep}}},
        {"seed", e.seed}};
    if (s.kind == JobKind::kRl) {
      const RlOptions& r = e.rl;
      j["engine"].erase("data");
      j["engine"].erase("optim");
      j["engine"].erase("checkpoint");
      j["engine"]["rl"] = {{"task", r.task},
                           {"envs", r.envs},
                           {"rollout_steps", r.rollout_steps},
                           {"total_env_steps", r.total_env_steps},
                           {"episode_steps", r.episode_steps},
                           {"success_radius", r.success_radius},
                           {"cameras", r.cameras},
                           {"gamma", r.gamma},
                           {"gae_lambda", r.gae_lambda},
                           {"clip", r.clip},
                           {"value_clip", r.value_clip},
                           {"value_coef", r.value_coef},
                           {"entropy_coef", r.entropy_coef},
                           {"epochs", r.epochs},
                           {"minibatches", r.minibatches},
                           {"lr", r.lr},
                           {"max_grad_norm", r.max_grad_norm},
                           {"init_log_std", r.init_log_std},
                           {"importance_cap", r.importance_cap}};
      json& rl = j["engine"]["rl"];
      const RlLatencyOptions& l = r.env_latency;
      if (l.mean_ms > 0.0) {
        rl["env_latency"] = {{"mean_ms", l.mean_ms},
                             {"jitter", l.jitter},
                             {"tail_probability", l.tail_probability},
                             {"tail_alpha", l.tail_alpha},
                             {"tail_scale", l.tail_scale},
                             {"busy", l.busy}};
      }
      if (r.disaggregated) {
        rl["disaggregated"] = {{"max_staleness", r.max_staleness},
                               {"proximal", r.proximal},
                               {"stale_lr_scale", r.stale_lr_scale}};
        if (r.rollout_ranks > 0) rl["disaggregated"]["rollout_ranks"] = r.rollout_ranks;
      }
      if (r.env_async) {
        rl["env_async"] = {{"max_batch", r.max_batch}, {"max_wait_ms", r.max_wait_ms}};
      }
      if (r.streaming) rl["streaming"] = {{"micro_batches", r.micro_batches}};
    }
    if (e.fp8.inference) {
      j["engine"]["fp8"] = {{"inference", true}, {"format", e.fp8.format}};
    }
    if (e.fp8.allreduce) j["engine"]["fp8"]["allreduce"] = true;
    if (e.fp8.compute) {
      j["engine"]["fp8"]["compute"] = true;
      j["engine"]["fp8"]["scaling"] = e.fp8.scaling;
      if (e.fp8.scaling == "delayed") j["engine"]["fp8"]["amax_history"] = e.fp8.amax_history;
    }
    if (!e.checkpoint.best_metric.empty()) {
      j["engine"]["checkpoint"]["best"] = {{"metric", e.checkpoint.best_metric},
                                           {"mode", e.checkpoint.best_mode}};
    }
    // Only when not the default, so specs stored before the option existed read back the same.
    if (e.precision != "fp32") j["engine"]["precision"] = e.precision;
    if (e.eval_every != 0) {
      j["engine"]["eval_every"] = e.eval_every;
      j["engine"]["eval_episodes"] = e.eval_episodes;
    }
  }
  return j;
}

}  // namespace api
