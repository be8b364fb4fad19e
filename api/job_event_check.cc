#include "api/job_event_check.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>
#include <string_view>

namespace api {

using nlohmann::json;

namespace {

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one (overlong,
// a surrogate, past U+10FFFF, or cut short).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

std::optional<EventRejection> Reject(std::string reason, std::string message,
                                     std::string field = "") {
  return EventRejection{std::move(reason), std::move(message), std::move(field)};
}

// Every key and string storable, at most kMaxEventDepth levels. `path` names where we are.
std::optional<EventRejection> CheckValue(const json& v, int depth, const std::string& path) {
  if (depth > kMaxEventDepth) {
    return Reject("too_deep",
                  "nested deeper than " + std::to_string(kMaxEventDepth) + " levels", path);
  }
  if (v.is_string()) {
    if (!IsStorableText(v.get_ref<const std::string&>())) {
      return Reject("bad_text", "a string that is not UTF-8 or holds NUL (\\u0000)", path);
    }
  } else if (v.is_object()) {
    for (const auto& [key, item] : v.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!IsStorableText(key)) {
        return Reject("bad_text", "a key that is not UTF-8 or holds NUL (\\u0000)",
                      path.empty() ? "" : path);
      }
      if (auto bad = CheckValue(item, depth + 1, at)) return bad;
    }
  } else if (v.is_array()) {
    size_t i = 0;
    for (const auto& item : v) {
      if (auto bad = CheckValue(item, depth + 1, path + "[" + std::to_string(i++) + "]")) {
        return bad;
      }
    }
  }
  return std::nullopt;
}

bool IsNonNegativeInteger(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// The typed fields of one known type: absent is fine unless `required`.
enum class Kind {
  kNumberOrNull,
  kRatioOrNull,  // a number in [0, 1], or null
  kCount,
  kNonNegativeNumber,
  kString,
  kObject,
  kNumberMap,
  kFp8Stats,
  kBool,
  kEvalTasks,
};

// FP8 statistics as engine::Fp8StatsJson writes them (PTQ and the fp8 all-reduce alike): these
// keys only, each a number ≥ 0 (counts as integers).
bool IsFp8Stats(const json& v) {
  if (!v.is_object()) return false;
  constexpr std::array<std::string_view, 4> kCounts = {"elements", "saturated", "underflowed",
                                                       "nan"};
  constexpr std::array<std::string_view, 3> kNumbers = {"amax", "scale_min", "scale_max"};
  for (const auto& [k, x] : v.items()) {
    if (std::find(kCounts.begin(), kCounts.end(), k) != kCounts.end()) {
      if (!IsNonNegativeInteger(x)) return false;
    } else if (std::find(kNumbers.begin(), kNumbers.end(), k) != kNumbers.end()) {
      if (!IsNonNegativeInteger(x) && !(x.is_number_float() && x.get<double>() >= 0.0)) {
        return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

bool IsFiniteNumber(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

// An eval job's per-task results as engine/jobs/eval.h writes them: 1-3 objects of exactly
// these keys, distinct built-in task names, 1..1000 episodes, 0..episodes successes, a success
// rate in [0, 1] and finite means. The server stores them in typed columns, so nothing looser.
bool IsEvalTasks(const json& v) {
  if (!v.is_array() || v.empty() || v.size() > 3) return false;
  std::vector<std::string> seen;
  for (const json& t : v) {
    if (!t.is_object() || t.size() != 6) return false;
    for (const char* k :
         {"task", "episodes", "successes", "success_rate", "mean_return", "mean_length"}) {
      if (!t.contains(k)) return false;
    }
    const json& task = t["task"];
    if (!task.is_string()) return false;
    const std::string name = task.get<std::string>();
    if (name != "reach" && name != "push" && name != "pick_place") return false;
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return false;
    seen.push_back(name);
    if (!t["episodes"].is_number_integer() || !t["successes"].is_number_integer()) return false;
    const int64_t episodes = t["episodes"].get<int64_t>(), successes = t["successes"].get<int64_t>();
    if (episodes < 1 || episodes > 1000 || successes < 0 || successes > episodes) return false;
    if (!IsFiniteNumber(t["success_rate"]) || !IsFiniteNumber(t["mean_return"]) ||
        !IsFiniteNumber(t["mean_length"])) {
      return false;
    }
    const double rate = t["success_rate"].get<double>();
    if (rate < 0.0 || rate > 1.0 || t["mean_length"].get<double>() < 0.0) return false;
  }
  return true;
}

struct FieldRule {
  const char* name;
  Kind kind;
  bool required = false;
};

std::optional<EventRejection> CheckField(const json& event, const FieldRule& rule) {
  auto it = event.find(rule.name);
  if (it == event.end()) {
    if (!rule.required) return std::nullopt;
    return Reject("bad_field", std::string("missing ") + rule.name, rule.name);
  }
  const json& v = *it;
  bool ok = false;
  const char* want = "";
  switch (rule.kind) {
    case Kind::kNumberOrNull:
      ok = v.is_number() || v.is_null();
      want = "a number";
      break;
    case Kind::kRatioOrNull:
      ok = v.is_null() || (v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1);
      want = "a number in [0, 1] or null";
      break;
    case Kind::kCount:
      ok = IsNonNegativeInteger(v);
      want = "an integer >= 0";
      break;
    case Kind::kNonNegativeNumber:
      ok = IsNonNegativeInteger(v) || (v.is_number_float() && v.get<double>() >= 0);
      want = "a number >= 0";
      break;
    case Kind::kString:
      ok = v.is_string() && !v.get_ref<const std::string&>().empty();
      want = "a non-empty string";
      break;
    case Kind::kObject:
      ok = v.is_object();
      want = "an object";
      break;
    case Kind::kFp8Stats:
      ok = IsFp8Stats(v);
      want = "FP8 statistics (elements, amax, scale_min, scale_max, saturated, underflowed, nan)";
      break;
    case Kind::kBool:
      ok = v.is_boolean();
      want = "true or false";
      break;
    case Kind::kEvalTasks:
      ok = IsEvalTasks(v);
      want = "1-3 distinct task results {task, episodes 1..1000, successes ≤ episodes, "
             "success_rate in [0, 1], mean_return, mean_length}";
      break;
    case Kind::kNumberMap:
      ok = v.is_object();
      for (const auto& [k, x] : v.items()) ok = ok && (x.is_number() || x.is_null());
      want = "an object of numbers";
      break;
  }
  if (ok) return std::nullopt;
  return Reject("bad_field",
                std::string(rule.name) + " must be " + want + ", got " + v.type_name(), rule.name);
}

constexpr std::array kStepRules = {
    FieldRule{"step", Kind::kNonNegativeNumber},  FieldRule{"steps", Kind::kNumberOrNull},
    FieldRule{"loss", Kind::kNumberOrNull},       FieldRule{"tokens_per_s", Kind::kNumberOrNull},
    FieldRule{"samples_per_s", Kind::kNumberOrNull},
    FieldRule{"step_seconds", Kind::kNumberOrNull},
    FieldRule{"lr", Kind::kNumberOrNull},         FieldRule{"grad_norm", Kind::kNumberOrNull},
    FieldRule{"data_wait_seconds", Kind::kNumberOrNull},
    FieldRule{"forward_seconds", Kind::kNumberOrNull},
    FieldRule{"backward_seconds", Kind::kNumberOrNull},
    FieldRule{"allreduce_seconds", Kind::kNumberOrNull},
    FieldRule{"optimizer_seconds", Kind::kNumberOrNull},
    FieldRule{"padding_ratio", Kind::kNumberOrNull},
    FieldRule{"packing_efficiency", Kind::kNumberOrNull},
    FieldRule{"mfu", Kind::kNumberOrNull},        FieldRule{"world_size", Kind::kNumberOrNull},
    // Gradient exchange: bytes this rank sent, and what fp32 would have (engine.fp8.allreduce).
    FieldRule{"grad_wire_bytes", Kind::kCount},
    FieldRule{"grad_wire_bytes_fp32", Kind::kCount},
    FieldRule{"fp8_allreduce", Kind::kFp8Stats},
    // FP8 compute (engine.fp8.compute): what this rank's products quantised, by format.
    FieldRule{"fp8_compute_e4m3", Kind::kFp8Stats},
    FieldRule{"fp8_compute_e5m2", Kind::kFp8Stats},
    // Reinforcement learning (kind "rl"): one step event per PPO update.
    FieldRule{"env_steps", Kind::kCount},         FieldRule{"episodes", Kind::kCount},
    FieldRule{"env_steps_per_s", Kind::kNumberOrNull},
    FieldRule{"mean_return", Kind::kNumberOrNull},
    FieldRule{"success_rate", Kind::kRatioOrNull},
    FieldRule{"policy_loss", Kind::kNumberOrNull},
    FieldRule{"value_loss", Kind::kNumberOrNull}, FieldRule{"entropy", Kind::kNumberOrNull},
    FieldRule{"approx_kl", Kind::kNumberOrNull},
    FieldRule{"clip_fraction", Kind::kRatioOrNull},
    FieldRule{"rollout_seconds", Kind::kNumberOrNull},
    FieldRule{"update_seconds", Kind::kNumberOrNull},
    // Asynchronous rl (engine.rl.disaggregated / env_async / streaming, docs/rl.md).
    FieldRule{"trajectories_per_s", Kind::kNumberOrNull},
    FieldRule{"staleness", Kind::kNumberMap},
    FieldRule{"staleness_mean", Kind::kNumberOrNull},
    FieldRule{"staleness_max", Kind::kCount},
    FieldRule{"queue_depth", Kind::kCount},
    FieldRule{"actor_idle_share", Kind::kRatioOrNull},
    FieldRule{"learner_idle_share", Kind::kRatioOrNull},
    FieldRule{"inference_batch", Kind::kNumberOrNull},
    FieldRule{"importance_capped", Kind::kRatioOrNull},
    // engine.eval_every: closed-loop evaluation at this step (engine/eval/periodic_eval.h).
    FieldRule{"eval_success_rate", Kind::kRatioOrNull},
    FieldRule{"eval_mean_return", Kind::kNumberOrNull},
    FieldRule{"eval_episodes", Kind::kCount},
};
constexpr std::array kCheckpointRules = {
    FieldRule{"step", Kind::kCount, true},
    FieldRule{"path", Kind::kString, true},
    FieldRule{"bytes", Kind::kCount},
    FieldRule{"metrics", Kind::kNumberMap},
};
constexpr std::array kEvalRules = {
    FieldRule{"step", Kind::kCount},
    FieldRule{"samples", Kind::kCount},
    FieldRule{"euler_steps", Kind::kCount},
    FieldRule{"action_mse", Kind::kNumberOrNull},
    FieldRule{"zero_action_mse", Kind::kNumberOrNull},
    // Kind eval (engine/jobs/eval.h): stored per task by the server.
    FieldRule{"tasks", Kind::kEvalTasks},
    FieldRule{"policy", Kind::kString},
    FieldRule{"fp8", Kind::kBool},
    FieldRule{"checkpoint_step", Kind::kCount},
    FieldRule{"seed", Kind::kCount},
};
constexpr std::array kDatasetRules = {
    FieldRule{"error", Kind::kString},
    FieldRule{"manifest", Kind::kObject},
};

template <size_t N>
std::optional<EventRejection> CheckFields(const json& event, const std::array<FieldRule, N>& rules) {
  for (const FieldRule& r : rules) {
    if (auto bad = CheckField(event, r)) return bad;
  }
  return std::nullopt;
}

bool IsTypeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

}  // namespace

bool IsStorableText(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\0') return false;
    const size_t n = Utf8SequenceAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string StorableText(std::string_view s, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  for (size_t i = 0; i < s.size();) {
    const size_t n = s[i] == '\0' ? 0 : Utf8SequenceAt(s, i);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(i, n);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::optional<EventRejection> CheckJobEvent(std::string_view type, const json& event) {
  if (!event.is_object()) return Reject("malformed", "an event must be a JSON object");
  if (type.empty()) return Reject("malformed", "an event needs a string type", "type");
  if (type.size() > kMaxEventTypeChars) {
    return Reject("bad_type", "type must be at most 64 characters", "type");
  }
  for (char c : type) {
    if (!IsTypeChar(c)) {
      return Reject("bad_type", "type must be made of A-Z a-z 0-9 _ . : / -", "type");
    }
  }
  if (auto bad = CheckValue(event, 1, "")) return bad;
  // Only now: dump() throws on text that is not UTF-8, which CheckValue has ruled out.
  if (event.dump().size() > kMaxEventBytes) {
    return Reject("too_large", "an event must be at most 64 KiB as JSON");
  }
  if (type == "step") return CheckFields(event, kStepRules);
  if (type == "checkpoint") return CheckFields(event, kCheckpointRules);
  if (type == "eval") return CheckFields(event, kEvalRules);
  if (type == "dataset") return CheckFields(event, kDatasetRules);
  return std::nullopt;
}

}  // namespace api
