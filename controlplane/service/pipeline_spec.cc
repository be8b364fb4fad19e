#include "controlplane/service/pipeline_spec.h"

#include <cmath>
#include <map>
#include <set>

namespace controlplane::service {

using common::InvalidArgument;
using common::Result;
using common::Status;
using nlohmann::json;

namespace {

constexpr double kMaxGateMargin = 1e6;

Status CheckKeys(const json& o, const std::set<std::string>& allowed, const std::string& field) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (!allowed.count(it.key())) return InvalidArgument("unknown field", field + "." + it.key());
  }
  return Status::Ok();
}

// {"step": NAME}: the step named (whether it exists is checked with the others).
Result<std::string> StepRefOf(const json& v, const std::string& field) {
  if (!v.is_object() || v.size() != 1 || !v.contains("step") || !v["step"].is_string()) {
    return InvalidArgument("must be {\"step\": NAME}", field);
  }
  return v["step"].get<std::string>();
}

Result<MetricRef> ParseMetricRef(const json& o, const std::string& field) {
  MetricRef m;
  if (!o.contains("step") || !o["step"].is_string()) {
    return InvalidArgument("is required: the eval step's name", field + ".step");
  }
  m.step = o["step"].get<std::string>();
  if (!o.contains("metric") || !o["metric"].is_string()) {
    return InvalidArgument("is required: success_rate, mean_return or mean_length",
                           field + ".metric");
  }
  m.metric = o["metric"].get<std::string>();
  if (m.metric != "success_rate" && m.metric != "mean_return" && m.metric != "mean_length") {
    return InvalidArgument("must be success_rate, mean_return or mean_length", field + ".metric");
  }
  if (o.contains("task")) {
    if (!o["task"].is_string()) return InvalidArgument("must be a string", field + ".task");
    m.task = o["task"].get<std::string>();
    if (m.task != "reach" && m.task != "push" && m.task != "pick_place") {
      return InvalidArgument("must be reach, push or pick_place", field + ".task");
    }
  }
  return m;
}

Result<Gate> ParseGate(const json& w, const std::string& field) {
  if (!w.is_object()) return InvalidArgument("must be an object", field);
  EMBODY_RETURN_IF_ERROR(CheckKeys(w, {"step", "metric", "task", "at_least"}, field));
  Gate g;
  EMBODY_ASSIGN_OR_RETURN(value, ParseMetricRef(w, field));
  g.value = std::move(value);
  if (!w.contains("at_least")) return InvalidArgument("is required", field + ".at_least");
  const json& a = w["at_least"];
  const std::string af = field + ".at_least";
  if (a.is_number()) {
    const double t = a.get<double>();
    if (!std::isfinite(t)) return InvalidArgument("must be a finite number", af);
    g.at_least = t;
    return g;
  }
  if (!a.is_object()) return InvalidArgument("must be a number or {\"step\", \"metric\"}", af);
  EMBODY_RETURN_IF_ERROR(CheckKeys(a, {"step", "metric", "task", "minus"}, af));
  EMBODY_ASSIGN_OR_RETURN(ref, ParseMetricRef(a, af));
  g.reference = std::move(ref);
  if (a.contains("minus")) {
    if (!a["minus"].is_number()) return InvalidArgument("must be a number", af + ".minus");
    g.minus = a["minus"].get<double>();
    if (!std::isfinite(g.minus) || g.minus < 0 || g.minus > kMaxGateMargin) {
      return InvalidArgument("must be a number in [0, 1e6]", af + ".minus");
    }
  }
  return g;
}

// Calls `visit` on every reference in `job` with its field and kind; with `replace`, puts what
// it returns in its place (eval.checkpoint_from_step becomes eval.checkpoint).
using Visit = std::function<Result<json>(const std::string& step, RefKind kind,
                                         const std::string& field)>;

Result<json> WalkRefs(json job, const Visit& visit, const std::string& field) {
  if (!job.is_object()) return InvalidArgument("must be a JobSpec object", field);
  if (job.contains("init_from") && job["init_from"].is_object()) {
    const std::string f = field + ".init_from";
    EMBODY_ASSIGN_OR_RETURN(step, StepRefOf(job["init_from"], f));
    EMBODY_ASSIGN_OR_RETURN(v, visit(step, RefKind::kCheckpoint, f));
    job["init_from"] = std::move(v);
  }
  if (job.contains("eval") && job["eval"].is_object() &&
      job["eval"].contains("checkpoint_from_step")) {
    json& ev = job["eval"];
    const std::string f = field + ".eval.checkpoint_from_step";
    if (ev.contains("checkpoint") || ev.contains("checkpoint_from_job")) {
      return InvalidArgument(
          "give exactly one of checkpoint_from_step, checkpoint_from_job and checkpoint", f);
    }
    if (!ev["checkpoint_from_step"].is_string()) return InvalidArgument("must be a step name", f);
    EMBODY_ASSIGN_OR_RETURN(
        v, visit(ev["checkpoint_from_step"].get<std::string>(), RefKind::kCheckpoint, f));
    ev.erase("checkpoint_from_step");
    ev["checkpoint"] = std::move(v);
  }
  if (job.contains("engine") && job["engine"].is_object() && job["engine"].contains("data") &&
      job["engine"]["data"].is_object() && job["engine"]["data"].contains("dataset") &&
      job["engine"]["data"]["dataset"].is_object()) {
    json& d = job["engine"]["data"]["dataset"];
    const std::string f = field + ".engine.data.dataset";
    EMBODY_ASSIGN_OR_RETURN(step, StepRefOf(d, f));
    EMBODY_ASSIGN_OR_RETURN(v, visit(step, RefKind::kDataset, f));
    d = std::move(v);
  }
  if (job.contains("datasets") && job["datasets"].is_array()) {
    json& list = job["datasets"];
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_object()) continue;
      const std::string f = field + ".datasets[" + std::to_string(i) + "]";
      EMBODY_ASSIGN_OR_RETURN(step, StepRefOf(list[i], f));
      EMBODY_ASSIGN_OR_RETURN(v, visit(step, RefKind::kDataset, f));
      list[i] = std::move(v);
    }
  }
  return job;
}

// Steps in an order where every step comes after those it needs; an error naming a step on a
// cycle when there is none.
Status CheckAcyclic(const PipelineSpec& spec) {
  const size_t n = spec.steps.size();
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> needed_by(n);
  for (size_t i = 0; i < n; ++i) {
    for (const std::string& need : spec.steps[i].needs) {
      needed_by[spec.Find(need)].push_back(static_cast<int>(i));
      ++waiting[i];
    }
  }
  std::vector<int> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int s = ready.back();
    ready.pop_back();
    ++done;
    for (int d : needed_by[s]) {
      if (--waiting[d] == 0) ready.push_back(d);
    }
  }
  if (done == n) return Status::Ok();
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] > 0) {
      return InvalidArgument("step \"" + spec.steps[i].name + "\" is on a cycle of needs",
                             "steps[" + std::to_string(i) + "].needs");
    }
  }
  return Status::Ok();
}

Result<PipelineStepSpec> ParseStepShape(const json& s, const std::string& field) {
  if (!s.is_object()) return InvalidArgument("must be an object", field);
  EMBODY_RETURN_IF_ERROR(CheckKeys(s, {"name", "needs", "retries", "when", "job", "import"}, field));
  PipelineStepSpec step;
  if (!s.contains("name") || !s["name"].is_string()) {
    return InvalidArgument("is required: a string", field + ".name");
  }
  step.name = s["name"].get<std::string>();
  if (!api::IsValidName(step.name)) {
    return InvalidArgument("must be 1-128 letters, digits, '-', '_' or '.'", field + ".name");
  }
  if (s.contains("needs")) {
    const json& needs = s["needs"];
    if (!needs.is_array() || needs.size() > kMaxPipelineSteps) {
      return InvalidArgument("must be an array of at most 64 step names", field + ".needs");
    }
    for (size_t k = 0; k < needs.size(); ++k) {
      if (!needs[k].is_string()) {
        return InvalidArgument("must be a step name", field + ".needs[" + std::to_string(k) + "]");
      }
      step.needs.push_back(needs[k].get<std::string>());
    }
  }
  if (s.contains("retries")) {
    if (!s["retries"].is_number_integer() || s["retries"].get<int64_t>() < 0 ||
        s["retries"].get<int64_t>() > kMaxStepRetries) {
      return InvalidArgument("must be an integer in 0..10", field + ".retries");
    }
    step.retries = s["retries"].get<int>();
  }
  if (s.contains("when")) {
    EMBODY_ASSIGN_OR_RETURN(g, ParseGate(s["when"], field + ".when"));
    step.when = std::move(g);
  }
  if (s.contains("job") && s.contains("import")) {
    return InvalidArgument("give one of job and import", field + ".import");
  }
  if (s.contains("import")) {
    const json& im = s["import"];
    const std::string f = field + ".import";
    if (!im.is_object()) return InvalidArgument("must be an object", f);
    EMBODY_RETURN_IF_ERROR(CheckKeys(im, {"name", "source"}, f));
    if (!im.contains("name") || !im["name"].is_string() ||
        !api::IsValidName(im["name"].get<std::string>())) {
      return InvalidArgument("is required: 1-128 letters, digits, '-', '_' or '.'", f + ".name");
    }
    if (!im.contains("source")) return InvalidArgument("is required", f + ".source");
    EMBODY_ASSIGN_OR_RETURN(source, api::ParseImportSource(im["source"], f + ".source"));
    if (source.upload) {
      return InvalidArgument(
          "a pipeline imports from a path; upload the file first (embody datasets upload) and "
          "name the dataset in a job instead",
          f + ".source.upload");
    }
    if (source.is_pull()) {
      return InvalidArgument(
          "a pipeline imports from a path; pull the image first (embody datasets pull) and name "
          "it in a job instead",
          f + ".source.registry");
    }
    step.import_step = ImportStep{im["name"].get<std::string>(), std::move(source)};
    step.job_kind = "import";
  } else if (s.contains("job")) {
    step.job = s["job"];
    if (!step.job.is_object()) return InvalidArgument("must be a JobSpec object", field + ".job");
    // What the references of other steps check against; confirmed by the parse of the job.
    if (step.job.contains("kind") && step.job["kind"].is_string()) {
      step.job_kind = step.job["kind"].get<std::string>();
    }
  } else if (!step.when) {
    return InvalidArgument("a step needs a job, an import, or a gate (when)", field + ".job");
  }
  return step;
}

}  // namespace

int PipelineSpec::Find(const std::string& name) const {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<bool> TransitiveNeeds(const PipelineSpec& spec, int step) {
  std::vector<bool> seen(spec.steps.size(), false);
  std::vector<int> todo{step};
  while (!todo.empty()) {
    const int s = todo.back();
    todo.pop_back();
    for (const std::string& need : spec.steps[s].needs) {
      const int n = spec.Find(need);
      if (n >= 0 && !seen[n]) {
        seen[n] = true;
        todo.push_back(n);
      }
    }
  }
  return seen;
}

Result<json> ResolveStepJob(const json& job, const ResolveRef& resolve, const std::string& field) {
  return WalkRefs(job,
                  [&resolve](const std::string& step, RefKind kind, const std::string&) {
                    return resolve(step, kind);
                  },
                  field);
}

Result<PipelineSpec> ParsePipelineSpec(const json& j, const api::SpecLimits& limits) {
  if (!j.is_object()) return InvalidArgument("the pipeline must be a JSON object");
  EMBODY_RETURN_IF_ERROR(CheckKeys(j, {"name", "steps"}, ""));
  PipelineSpec spec;
  if (!j.contains("name") || !j["name"].is_string() ||
      !api::IsValidName(j["name"].get<std::string>())) {
    return InvalidArgument("is required: 1-128 letters, digits, '-', '_' or '.'", "name");
  }
  spec.name = j["name"].get<std::string>();
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty() ||
      j["steps"].size() > kMaxPipelineSteps) {
    return InvalidArgument("is required: an array of 1-64 steps", "steps");
  }
  const json& steps = j["steps"];
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string field = "steps[" + std::to_string(i) + "]";
    EMBODY_ASSIGN_OR_RETURN(step, ParseStepShape(steps[i], field));
    if (spec.Find(step.name) >= 0) {
      return InvalidArgument("step name \"" + step.name + "\" is used twice", field + ".name");
    }
    spec.steps.push_back(std::move(step));
  }
  // Needs name existing steps, once each, never the step itself; and form no cycle.
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    std::set<std::string> seen;
    for (size_t k = 0; k < spec.steps[i].needs.size(); ++k) {
      const std::string& need = spec.steps[i].needs[k];
      const std::string field = "steps[" + std::to_string(i) + "].needs[" + std::to_string(k) + "]";
      if (spec.Find(need) < 0) return InvalidArgument("no step named \"" + need + "\"", field);
      if (need == spec.steps[i].name) return InvalidArgument("a step cannot need itself", field);
      if (!seen.insert(need).second) return InvalidArgument("named twice", field);
    }
  }
  EMBODY_RETURN_IF_ERROR(CheckAcyclic(spec));

  // References: to steps this one needs (transitively), of the kind that makes the artifact.
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    PipelineStepSpec& step = spec.steps[i];
    const std::string field = "steps[" + std::to_string(i) + "]";
    const std::vector<bool> needed = TransitiveNeeds(spec, static_cast<int>(i));
    auto needed_step = [&](const std::string& name, const std::string& f) -> Result<int> {
      const int s = spec.Find(name);
      if (s < 0) return InvalidArgument("no step named \"" + name + "\"", f);
      if (!needed[s]) {
        return InvalidArgument("step \"" + name + "\" is not among the steps \"" + step.name +
                                   "\" needs (add it to needs)",
                               f);
      }
      return s;
    };
    if (step.when) {
      std::vector<std::pair<const MetricRef*, std::string>> sides{{&step.when->value, ".when.step"}};
      if (step.when->reference) sides.push_back({&*step.when->reference, ".when.at_least.step"});
      for (const auto& [m, f] : sides) {
        EMBODY_ASSIGN_OR_RETURN(s, needed_step(m->step, field + f));
        if (spec.steps[s].job_kind != "eval") {
          return InvalidArgument("a gate reads the results of an eval step; \"" + m->step +
                                     "\" is not one",
                                 field + f);
        }
      }
    }
    if (step.job.is_null()) continue;
    // The job as POST /v1/jobs would check it, each reference replaced by a placeholder of the
    // value it will have.
    std::vector<std::string> referenced;
    auto placeholder = [&](const std::string& name, RefKind kind,
                           const std::string& f) -> Result<json> {
      EMBODY_ASSIGN_OR_RETURN(s, needed_step(name, f));
      const PipelineStepSpec& source = spec.steps[s];
      referenced.push_back(name);
      if (kind == RefKind::kDataset) {
        if (!source.import_step) {
          return InvalidArgument("step \"" + name + "\" imports no dataset", f);
        }
        return json("dataset:" + source.import_step->dataset_name);
      }
      if (source.job_kind != "train" && source.job_kind != "rl") {
        return InvalidArgument("step \"" + name + "\" makes no checkpoint (kind train or rl does)",
                               f);
      }
      if (step.job.contains("eval") && step.job["eval"].is_object() &&
          step.job["eval"].value("fp8", false) && source.job_kind == "rl") {
        return InvalidArgument(
            "FP8 evaluation applies to behaviour-cloning checkpoints; step \"" + name +
                "\" is kind rl, whose checkpoints are rl policies",
            field + ".job.eval.fp8");
      }
      return json(1);
    };
    EMBODY_ASSIGN_OR_RETURN(concrete, WalkRefs(step.job, placeholder, field + ".job"));
    if (!concrete.contains("name")) {
      // Named after the pipeline and the step unless the step names it.
      concrete["name"] = (spec.name + "." + step.name).substr(0, 128);
      step.job["name"] = concrete["name"];
    }
    auto parsed = api::ParseJobSpec(concrete, limits);
    if (!parsed.ok()) {
      const Status& st = parsed.status();
      return Status(st.code(), st.message(),
                    field + ".job" + (st.field().empty() ? "" : "." + st.field()));
    }
    if (parsed->kind == api::JobKind::kImport) {
      return InvalidArgument("an import is a step's \"import\" (as POST /v1/datasets takes it)",
                             field + ".job.kind");
    }
    step.job_kind = api::JobKindName(parsed->kind);
    step.referenced = std::move(referenced);
  }
  return spec;
}

Result<PipelineSpec> ParsePipelineSpecText(const std::string& body,
                                           const api::SpecLimits& limits) {
  if (body.size() > kMaxPipelineBodyBytes) {
    return InvalidArgument("request body over 1 MiB");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("request body is not valid JSON");
  return ParsePipelineSpec(j, limits);
}

}  // namespace controlplane::service
