#include "cli/dataset_format.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "cli/format.h"
#include "cli/tenancy_format.h"

namespace cli {

using nlohmann::json;

namespace {

std::string Size(const json& d) {
  const json& b = d.contains("bytes") ? d["bytes"] : json();
  if (!b.is_number()) return "-";
  const double v = b.get<double>();
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

}  // namespace

std::string DatasetsTable(const json& reply) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "VERSION", "STATE", "EPISODES", "FRAMES", "SIZE", "JOB", "CREATED"}};
  if (reply.contains("datasets") && reply["datasets"].is_array()) {
    for (const json& d : reply["datasets"]) {
      rows.push_back({Cell(d, "id"), Cell(d, "name"), Cell(d, "version"), Cell(d, "state"),
                      Cell(d, "episodes"), Cell(d, "frames"), Size(d), Cell(d, "job_id"),
                      Cell(d, "created_at")});
    }
  }
  return FormatTable(rows);
}

std::string DatasetDetail(const json& d) {
  std::string state = Cell(d, "state");
  if (state == "importing" && d.contains("progress") && d["progress"].is_number()) {
    state += " (" + std::to_string(static_cast<int>(100 * d["progress"].get<double>())) + "%)";
  }
  std::vector<std::pair<std::string, std::string>> lines = {
      {"id", Cell(d, "id")},
      {"name", Cell(d, "name") + " version " + Cell(d, "version")},
      {"tenant", Cell(d, "tenant")},
      {"state", state}};
  if (d.contains("error") && d["error"].is_string() && !d["error"].get<std::string>().empty()) {
    lines.push_back({"error", Cell(d, "error")});
  }
  lines.push_back({"episodes", Cell(d, "episodes")});
  lines.push_back({"frames", Cell(d, "frames")});
  lines.push_back({"size", Size(d)});
  if (d.contains("source") && d["source"].is_object()) {
    const json& src = d["source"];
    if (src.contains("registry")) {
      // A pulled image: where from, and which image that reference named when it was pulled.
      lines.push_back({"source", Cell(src, "registry") + "/" + Cell(src, "reference") + " (" +
                                     Cell(src, "registry_url") + ")"});
      const json& m = d.contains("manifest") ? d["manifest"] : json();
      if (m.is_object() && m.contains("image") && m["image"].is_object()) {
        lines.push_back({"digest", Cell(m["image"], "digest")});
      }
    } else if (src.contains("upload")) {
      lines.push_back({"source", "upload"});
    } else {
      lines.push_back({"source", Cell(src, "path")});
    }
  }
  lines.push_back({"path", Cell(d, "path")});
  lines.push_back({"import job", Cell(d, "job_id")});
  lines.push_back({"created", Cell(d, "created_at")});
  const json& m = d.contains("manifest") ? d["manifest"] : json();
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
