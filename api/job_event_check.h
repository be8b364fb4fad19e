// The rules a job event meets before anything keeps it: the agent checks every event a job posts
// to its local API (and refuses a bad one to the job), the server checks every event a heartbeat
// carries again (and drops a bad one, storing the rest). One function, so the two never disagree.
//
// An event is the object a job posted: a string `type` plus any fields. It must be:
//   - at most kMaxEventBytes as compact JSON and at most kMaxEventDepth levels deep;
//   - text PostgreSQL can store: every string and key valid UTF-8 without NUL (a `text` or `jsonb`
//     value cannot hold U+0000, and one such event would fail the whole heartbeat that carries it);
//   - of a `type` of 1-64 characters of [A-Za-z0-9_.:/-];
//   - for the types the platform reads (step, checkpoint, eval, dataset), typed as
//     docs/contracts.md says: e.g. a checkpoint's `step` an integer >= 0 and `path` a string.
// Other types carry any fields. Nothing here looks at the job or the node: that is the caller's.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace api {

inline constexpr size_t kMaxEventBytes = 64 * 1024;
inline constexpr size_t kMaxEventTypeChars = 64;
inline constexpr int kMaxEventDepth = 32;

// Why an event was refused. `reason` is a short fixed word, fit for a metric label:
//   malformed  not an object, or without a string type
//   bad_type   the type's name is not 1-64 characters of [A-Za-z0-9_.:/-]
//   too_large  over kMaxEventBytes
//   too_deep   nested deeper than kMaxEventDepth
//   bad_text   a string or key that is not UTF-8, or holds NUL
//   bad_field  a field of a known type with the wrong JSON type or range
// `message` says which field and what is wrong, for the job (4xx) or the log.
struct EventRejection {
  std::string reason;
  std::string message;
  std::string field;  // the event's field at fault ("" for the whole event)
};

// nullopt: the event may be kept. `event` is the whole object (it has "type" in it); `type` is
// given separately because the heartbeat carries it beside the object.
std::optional<EventRejection> CheckJobEvent(std::string_view type, const nlohmann::json& event);

// Whether `s` is valid UTF-8 (no overlong forms, no surrogates) without a NUL byte.
bool IsStorableText(std::string_view s);

// `s` with every NUL byte and invalid UTF-8 sequence replaced by U+FFFD, cut to at most
// `max_bytes` on a character boundary: for text the server keeps whatever it says.
std::string StorableText(std::string_view s, size_t max_bytes);

}  // namespace api
