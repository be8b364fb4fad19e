// The "engine" section of kinds train and rl: model, data, attention and precision, FP8,
// optimizer and checkpoint schedule, and the checks across them. engine.rl is read in
// job_spec_rl.cc.
#include <string>
#include <vector>

#include "api/dataset_ref.h"
#include "api/job_spec_internal.h"

namespace api::job_spec_internal {

namespace {

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

}  // namespace

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

}  // namespace api::job_spec_internal
