#include "cli/dataset_format.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "cli/format.h"
#include "cli/tenancy_format.h"
#include "common/time_util.h"

namespace cli {

using nlohmann::json;

namespace {

std::string Size(const api::v1::Dataset& d) {
  const double v = static_cast<double>(d.bytes);
  char buf[32];
  if (v >= 1 << 30) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", v / (1 << 30));
  } else if (v >= 1 << 20) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", v / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f KiB", v / 1024);
  }
  return buf;
}

std::string Lines(const std::vector<std::pair<std::string, std::string>>& lines) {
  size_t w = 0;
  for (const auto& [k, v] : lines) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : lines) out += k + ":" + std::string(w - k.size() + 1, ' ') + v + "\n";
  return out;
}

std::string OrDash(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

}  // namespace

std::string DatasetsTable(const api::v1::DatasetList& reply) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "VERSION", "STATE", "EPISODES", "FRAMES", "SIZE", "JOB", "CREATED"}};
  for (const api::v1::Dataset& d : reply.datasets) {
    rows.push_back({std::to_string(d.id), d.name, std::to_string(d.version), d.state,
                    std::to_string(d.episodes), std::to_string(d.frames), Size(d), OrDash(d.job_id),
                    common::FormatTimeMillis(d.created_ms)});
  }
  return FormatTable(rows);
}

std::string DatasetQueuedLine(const api::v1::Dataset& d, const std::string& doing) {
  const std::string id = std::to_string(d.id);
  return "dataset " + id + " (" + d.name + " version " + std::to_string(d.version) + ") " + doing +
         " as job " + OrDash(d.job_id) + "; follow it with `embody datasets show " + id + "`\n";
}

std::string DatasetDetail(const api::v1::DatasetDetail& detail) {
  const api::v1::Dataset& d = detail.dataset;
  std::string state = d.state;
  if (state == "importing" && detail.progress) {
    state += " (" + std::to_string(static_cast<int>(100 * *detail.progress)) + "%)";
  }
  std::vector<std::pair<std::string, std::string>> lines = {
      {"id", std::to_string(d.id)},
      {"name", d.name + " version " + std::to_string(d.version)},
      {"tenant", d.tenant},
      {"state", state}};
  if (!d.error.empty()) lines.push_back({"error", d.error});
  lines.push_back({"episodes", std::to_string(d.episodes)});
  lines.push_back({"frames", std::to_string(d.frames)});
  lines.push_back({"size", Size(d)});
  if (d.source.is_object()) {
    const json& src = d.source;
    if (src.contains("registry")) {
      // A pulled image: where from, and which image that reference named when it was pulled.
      lines.push_back({"source", Cell(src, "registry") + "/" + Cell(src, "reference") + " (" +
                                     Cell(src, "registry_url") + ")"});
      const json& m = detail.manifest;
      if (m.is_object() && m.contains("image") && m["image"].is_object()) {
        lines.push_back({"digest", Cell(m["image"], "digest")});
      }
    } else if (src.contains("upload")) {
      lines.push_back({"source", "upload"});
    } else {
      lines.push_back({"source", Cell(src, "path")});
    }
  }
  lines.push_back({"path", d.path});
  lines.push_back({"import job", OrDash(d.job_id)});
  lines.push_back({"created", common::FormatTimeMillis(d.created_ms)});
  const json& m = detail.manifest;
  if (m.is_object() && m.contains("stats") && m["stats"].is_object()) {
    const json& s = m["stats"];
    if (s.contains("tokens")) lines.push_back({"tokens", Cell(s, "tokens")});
    if (s.contains("keys") && s["keys"].is_array()) {
      for (const json& k : s["keys"]) {
        if (!k.is_object()) continue;
        const json& spec = k.contains("spec") ? k["spec"] : k;
        std::string name = spec.is_object() ? Cell(spec, "name") : "-";
        std::string shape = spec.is_object() && spec.contains("shape") ? spec["shape"].dump() : "-";
        lines.push_back({"key " + name, shape});
      }
    }
  }
  return Lines(lines);
}

json DatasetImportBody(const std::string& name, const std::string& path,
                       const DatasetImportFlags& flags) {
  json source{{"format", flags.format.empty() ? "hdf5" : flags.format}, {"path", path}};
  if (!flags.filter.empty()) source["filter"] = flags.filter;
  if (!flags.language.empty()) source["language"] = flags.language;
  if (!flags.nan.empty()) source["nan"] = flags.nan;
  if (!flags.resize.empty()) source["resize"] = flags.resize;
  return json{{"name", name}, {"source", source}};
}

json DatasetPullBody(const std::string& name, const std::string& image) {
  const size_t slash = image.find('/');
  json source{{"format", "oci"},
              {"registry", image.substr(0, slash)},
              {"reference", slash == std::string::npos ? "" : image.substr(slash + 1)}};
  return json{{"name", name}, {"source", source}};
}

}  // namespace cli
