// The sections of the kinds that run no built-in engine: import's source, eval's checkpoint and
// tasks, command's datasets and environment (with ParsePythonEnvironment, which the agent uses
// too).
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/dataset_ref.h"
#include "api/job_spec_internal.h"

namespace api {

using common::InvalidArgument;
using common::Result;

namespace job_spec_internal {

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

}  // namespace job_spec_internal

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

}  // namespace api
