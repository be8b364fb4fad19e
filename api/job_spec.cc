// ParseJobSpec: the top level of a job spec (name, kind, resources, the fields every kind
// shares) and which sections each kind may hold. The sections themselves are read in
// job_spec_engine.cc, job_spec_rl.cc and job_spec_kinds.cc; ToJson is in job_spec_json.cc.
#include "api/job_spec.h"

#include "api/dataset_ref.h"
#include "api/job_spec_internal.h"

namespace api {

using common::Code;
using common::InvalidArgument;
using common::Result;
using common::Status;
using nlohmann::json;
using job_spec_internal::ObjectReader;
using job_spec_internal::ParseCommandDatasets;
using job_spec_internal::ParseEngine;
using job_spec_internal::ParseEnvironment;
using job_spec_internal::ParseEval;
using job_spec_internal::ParseImport;

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

bool ValidName(const std::string& s) { return IsValidName(s); }

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

}  // namespace api
