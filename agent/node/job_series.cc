#include "agent/node/job_series.h"

#include <map>

namespace agent {
namespace {

constexpr std::string_view kPrefix = "embody_job_";

std::string Sanitise(std::string_view field) {
  std::string out;
  for (char c : field) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!keep) c = '_';
    if (c == '_' && (out.empty() || out.back() == '_')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Replaces `suffix` at the end of `*s` with `with` when present; true if it did.
bool ReplaceSuffix(std::string* s, std::string_view suffix, std::string_view with) {
  if (!EndsWith(*s, suffix)) return false;
  s->replace(s->size() - suffix.size(), suffix.size(), with);
  return true;
}

}  // namespace

std::optional<JobSeriesName> NameJobSeries(std::string_view field) {
  if (field.size() > kMaxFieldLength) return std::nullopt;
  std::string base = Sanitise(field);
  if (base.empty()) return std::nullopt;

  static const std::map<std::string, std::string, std::less<>> kRenames = {
      {"tokens_per_s", "tokens_per_second"},
      {"samples_per_s", "samples_per_second"},
      {"lr", "learning_rate"},
      {"packing_efficiency", "packing_efficiency_ratio"},
      {"mfu", "mfu_ratio"},
      {"steps", "target_steps"},
  };
  double scale = 1.0;
  if (auto it = kRenames.find(base); it != kRenames.end()) {
    base = it->second;
  } else if (ReplaceSuffix(&base, "_per_s", "_per_second")) {
  } else if (ReplaceSuffix(&base, "_ms", "_seconds")) {
    scale = 1e-3;
  } else if (ReplaceSuffix(&base, "_s", "_seconds") || ReplaceSuffix(&base, "_sec", "_seconds") ||
             ReplaceSuffix(&base, "_secs", "_seconds")) {
  } else if (ReplaceSuffix(&base, "_percent", "_ratio") || ReplaceSuffix(&base, "_pct", "_ratio")) {
    scale = 0.01;
  }
  if (base == "steps_total" || base.rfind("process_", 0) == 0) return std::nullopt;
  return JobSeriesName{std::string(kPrefix) + base, scale};
}

std::string JobSeriesHelp(const std::string& name) {
  static const std::map<std::string, std::string, std::less<>> kHelp = {
      {"embody_job_step", "Latest optimizer step the job reported"},
      {"embody_job_target_steps", "Optimizer steps the job plans to run"},
      {"embody_job_loss", "Latest training loss"},
      {"embody_job_tokens_per_second",
       "Latest training throughput in real (unpadded) tokens per second"},
      {"embody_job_samples_per_second", "Latest training throughput in samples per second"},
      {"embody_job_step_seconds", "Duration of the latest step"},
      {"embody_job_learning_rate", "Learning rate of the latest step"},
      {"embody_job_grad_norm", "Gradient norm of the latest step"},
      {"embody_job_padding_ratio", "Fraction of the latest step's tokens that were padding"},
      {"embody_job_packing_efficiency_ratio",
       "Real tokens over packed capacity in the latest step"},
      {"embody_job_mfu_ratio", "Estimated model FLOPs utilisation of the latest step"},
  };
  if (auto it = kHelp.find(name); it != kHelp.end()) return it->second;
  return "Latest value of a numeric field of the job's step events";
}

}  // namespace agent
