#include "api/v1/job.h"

#include <charconv>

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

JobPlacement ReadJobPlacement(FieldReader& r) {
  JobPlacement p;
  p.node_id = r.Int("node_id");
  p.node = r.String("node");
  p.ranks = r.Int32("ranks");
  return p;
}

JobCheckpoint ReadCheckpoint(FieldReader& r) {
  JobCheckpoint c;
  c.path = r.String("path");
  c.step = r.Int("step");
  c.bytes = r.Int("bytes");
  return c;
}

// A document of a single job's view: absent (nullopt), null, or an object, kept whole.
std::optional<json> ReadOptionalDocument(FieldReader& r, const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (!it->is_object() && !it->is_null()) {
    r.Note(common::InvalidArgument("must be an object or null", r.PathOf(key)));
    return std::nullopt;
  }
  return *it;
}

// FieldReader reads the fields; the documents kept whole are taken from `j` itself.
Job ReadJob(FieldReader& r, const json& j) {
  Job job;
  job.id = r.Int("id");
  job.tenant_id = r.Int("tenant_id");
  job.tenant = r.String("tenant");
  job.name = r.String("name");
  job.kind = r.String("kind");
  job.state = r.String("state");
  job.reason = r.String("reason");
  job.priority = r.Int32("priority");
  if (const json* spec = r.Object("spec")) job.spec = *spec;
  job.attempt = r.Int32("attempt");
  job.exit_code = r.NullableInt32("exit_code");
  job.created_ms = r.Time("created_at");
  job.updated_ms = r.Time("updated_at");
  job.started_ms = r.NullableTime("started_at");
  job.finished_ms = r.NullableTime("finished_at");
  job.wait_seconds = r.NullableNumber("wait_seconds");
  job.allocation = ReadArray<JobPlacement>(r, "allocation", ReadJobPlacement);
  if (const json* step = r.NullableObject("last_step")) job.last_step = *step;
  if (const json* c = r.NullableObject("latest_checkpoint")) {
    FieldReader nested(*c, r.PathOf("latest_checkpoint"));
    job.latest_checkpoint = ReadCheckpoint(nested);
    r.Note(nested.status());
  }
  if (j.is_object()) {
    job.launch_phases = ReadOptionalDocument(r, j, "launch_phases");
    job.forecast = ReadOptionalDocument(r, j, "forecast");
    job.pipeline = ReadOptionalDocument(r, j, "pipeline");
  }
  return job;
}

// ReadArray for jobs, whose reader needs each element's JSON besides its FieldReader.
std::vector<Job> ReadJobs(FieldReader& r, const char* key) {
  std::vector<Job> out;
  const json* a = r.Array(key);
  if (a == nullptr) return out;
  out.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) {
    FieldReader item((*a)[i], r.PathOf(key, i));
    out.push_back(ReadJob(item, (*a)[i]));
    r.Note(item.status());
  }
  return out;
}

Event ReadEvent(FieldReader& r) {
  Event e;
  e.id = r.Int("id");
  e.time_ms = r.Time("time");
  e.type = r.String("type");
  if (const json* data = r.Object("data")) e.data = *data;
  return e;
}

// --- AppendJson: dump()'s text without the tree.

// The text nlohmann's dump() writes for a value, as the server sends it, written into `out`
// itself by the serializer dump() uses (in nlohmann's detail namespace: a new nlohmann that
// changed it fails JobViewTest's comparisons of AppendJson with dump()).
void AppendDump(const json& value, std::string& out) {
  nlohmann::detail::serializer<json> s(nlohmann::detail::output_adapter<char>(out), ' ',
                                       json::error_handler_t::replace);
  s.dump(value, /*pretty_print=*/false, /*ensure_ascii=*/false, /*indent_step=*/0);
}

// A JSON string. Most strings here (names, states, times) need no escaping and are copied as
// they are; any other goes through nlohmann, so escapes and replaced bytes are exactly dump()'s.
void AppendString(const std::string& s, std::string& out) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x80 || c == '"' || c == '\\') return AppendDump(json(s), out);
  }
  out += '"';
  out += s;
  out += '"';
}

// `value` written by `write`, or null.
template <typename T, typename Write>
void AppendOrNull(const std::optional<T>& value, Write write, std::string& out) {
  if (value) {
    write(*value);
  } else {
    out += "null";
  }
}

void AppendTime(int64_t ms, std::string& out) {
  out += '"';
  common::AppendTimeMillis(ms, out);
  out += '"';
}

void AppendTime(const std::optional<int64_t>& ms, std::string& out) {
  AppendOrNull(ms, [&](int64_t t) { AppendTime(t, out); }, out);
}

void AppendInt(int64_t x, std::string& out) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof(buf), x).ptr);
}

// `,"key":` (a key that needs no escaping).
void AppendKey(const char* key, std::string& out) {
  out += ",\"";
  out += key;
  out += "\":";
}

void AppendOptionalDocument(const char* key, const std::optional<json>& doc, std::string& out) {
  if (!doc) return;
  AppendKey(key, out);
  AppendDump(*doc, out);
}

}  // namespace

json ToJson(const Job& j) {
  json alloc = json::array();
  for (const JobPlacement& a : j.allocation) {
    alloc.push_back({{"node_id", a.node_id}, {"node", a.node}, {"ranks", a.ranks}});
  }
  json ckpt = nullptr;
  if (const auto& c = j.latest_checkpoint) {
    ckpt = {{"path", c->path}, {"step", c->step}, {"bytes", c->bytes}};
  }
  json out = {{"id", j.id},
              {"tenant_id", j.tenant_id},
              {"tenant", j.tenant},
              {"name", j.name},
              {"kind", j.kind},
              {"state", j.state},
              {"reason", j.reason},
              {"priority", j.priority},
              {"spec", j.spec},
              {"attempt", j.attempt},
              {"exit_code", OrNull(j.exit_code)},
              {"created_at", common::FormatTimeMillis(j.created_ms)},
              {"updated_at", common::FormatTimeMillis(j.updated_ms)},
              {"started_at", TimeOrNull(j.started_ms)},
              {"finished_at", TimeOrNull(j.finished_ms)},
              {"wait_seconds", OrNull(j.wait_seconds)},
              {"allocation", std::move(alloc)},
              {"last_step", j.last_step ? *j.last_step : json(nullptr)},
              {"latest_checkpoint", std::move(ckpt)}};
  if (j.launch_phases) out["launch_phases"] = *j.launch_phases;
  if (j.forecast) out["forecast"] = *j.forecast;
  if (j.pipeline) out["pipeline"] = *j.pipeline;
  return out;
}

json ToJson(const JobList& l) {
  json jobs = json::array();
  for (const Job& j : l.jobs) jobs.push_back(ToJson(j));
  return {{"jobs", std::move(jobs)}, {"next_cursor", OrNull(l.next_cursor)}};
}

json ToJson(const Event& e) {
  return {{"id", e.id},
          {"time", common::FormatTimeMillis(e.time_ms)},
          {"type", e.type},
          {"data", e.data}};
}

json ToJson(const EventList& l) {
  json events = json::array();
  for (const Event& e : l.events) events.push_back(ToJson(e));
  return {{"events", std::move(events)}};
}

void AppendJson(const Job& j, std::string& out) {
  // Keys in the order dump() writes an object's: sorted.
  out += "{\"allocation\":[";
  for (size_t i = 0; i < j.allocation.size(); ++i) {
    const JobPlacement& a = j.allocation[i];
    if (i) out += ',';
    out += "{\"node\":";
    AppendString(a.node, out);
    out += ",\"node_id\":";
    AppendInt(a.node_id, out);
    out += ",\"ranks\":";
    AppendInt(a.ranks, out);
    out += '}';
  }
  out += ']';
  AppendKey("attempt", out);
  AppendInt(j.attempt, out);
  AppendKey("created_at", out);
  AppendTime(j.created_ms, out);
  AppendKey("exit_code", out);
  AppendOrNull(j.exit_code, [&](int64_t c) { AppendInt(c, out); }, out);
  AppendKey("finished_at", out);
  AppendTime(j.finished_ms, out);
  AppendOptionalDocument("forecast", j.forecast, out);
  AppendKey("id", out);
  AppendInt(j.id, out);
  AppendKey("kind", out);
  AppendString(j.kind, out);
  AppendKey("last_step", out);
  AppendOrNull(j.last_step, [&](const json& d) { AppendDump(d, out); }, out);
  AppendKey("latest_checkpoint", out);
  AppendOrNull(
      j.latest_checkpoint,
      [&](const auto& c) {
        out += "{\"bytes\":";
        AppendInt(c.bytes, out);
        out += ",\"path\":";
        AppendString(c.path, out);
        out += ",\"step\":";
        AppendInt(c.step, out);
        out += '}';
      },
      out);
  AppendOptionalDocument("launch_phases", j.launch_phases, out);
  AppendKey("name", out);
  AppendString(j.name, out);
  AppendOptionalDocument("pipeline", j.pipeline, out);
  AppendKey("priority", out);
  AppendInt(j.priority, out);
  AppendKey("reason", out);
  AppendString(j.reason, out);
  AppendKey("spec", out);
  AppendDump(j.spec, out);
  AppendKey("started_at", out);
  AppendTime(j.started_ms, out);
  AppendKey("state", out);
  AppendString(j.state, out);
  AppendKey("tenant", out);
  AppendString(j.tenant, out);
  AppendKey("tenant_id", out);
  AppendInt(j.tenant_id, out);
  AppendKey("updated_at", out);
  AppendTime(j.updated_ms, out);
  AppendKey("wait_seconds", out);
  // dump()'s own number format
  AppendOrNull(j.wait_seconds, [&](double w) { AppendDump(w, out); }, out);
  out += '}';
}

void AppendJson(const JobList& l, std::string& out) {
  out += "{\"jobs\":[";
  for (size_t i = 0; i < l.jobs.size(); ++i) {
    if (i) out += ',';
    AppendJson(l.jobs[i], out);
  }
  out += "],\"next_cursor\":";
  AppendOrNull(l.next_cursor, [&](const std::string& c) { AppendString(c, out); }, out);
  out += '}';
}

common::Result<Job> ParseJob(const json& j) {
  return ReadDocument<Job>(j, [&j](FieldReader& r) { return ReadJob(r, j); });
}

common::Result<JobList> ParseJobList(const json& j) {
  return ReadDocument<JobList>(j, [](FieldReader& r) {
    JobList l;
    l.jobs = ReadJobs(r, "jobs");
    l.next_cursor = r.NullableString("next_cursor");
    return l;
  });
}

common::Result<Event> ParseEvent(const json& j) { return ReadDocument<Event>(j, ReadEvent); }

common::Result<EventList> ParseEventList(const json& j) {
  return ReadDocument<EventList>(
      j, [](FieldReader& r) { return EventList{ReadArray<Event>(r, "events", ReadEvent)}; });
}

}  // namespace api::v1
