// Where a job's launch spent its time, from placement to the slot being free again: the record
// kept with each attempt that ended on its node, the `launch_phases` of the job's view
// (docs/contracts.md, "Launch phases"), and the consecutive durations the server's
// embody_job_launch_phase_seconds histograms observe.
//
// Two clocks meet here and are never compared. The server's (wall time) dates what it did itself:
// the placement (SCHEDULED), the launch handed out (the first heartbeat reply carrying it), the
// job heard running, its exit stored (the transaction that also releases its allocation, so the
// slot is free to the scheduler from then on). The head agent's (monotonic) measures what the
// node did, as durations from its receipt of the launch (api::LaunchTimings). What the server saw
// between handing the launch out and storing the exit, less what the node accounts for, is
// `transit`: the launch's and the report's way over the network and the server's own work.
//
// Kept as job events the server writes (the job cannot: StoreEvents refuses these types from a
// job): `launch_sent` {attempt, node, placed_ms} when a launch is first handed out, and
// `launch_phases` (LaunchPhases as ToStoredJson writes it) in the transaction storing the end.
// This file is pure: no store, no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

inline constexpr const char* kLaunchSentEvent = "launch_sent";
inline constexpr const char* kLaunchPhasesEvent = "launch_phases";

// Whether a job may post an event of `type` (these are the server's own).
bool IsLaunchPhaseEvent(const std::string& type);

// The data of the launch_sent event written when `job` (SCHEDULED) is first handed to `node`: its
// placement time is the job's last update, the SCHEDULED transition.
nlohmann::json LaunchSentData(const JobRecord& job, const std::string& node);

struct LaunchPhases {
  int attempt = 0;
  std::string node;
  int64_t submitted_ms = 0;  // server clock, as every *_ms here but `agent`
  std::optional<int64_t> placed_ms;
  std::optional<int64_t> launch_sent_ms;
  std::optional<int64_t> running_ms;      // heard running (not on the chain of phases below)
  std::optional<int64_t> exit_stored_ms;  // also the slot freed, in the same transaction
  api::LaunchTimings agent;               // the head agent's durations since its receipt
};

// One consecutive phase: its name and milliseconds. In order: queued (submitted -> placed),
// dispatch (placed -> launch sent), sandbox (agent's receipt -> sandbox prepared), spawn (->
// process started), run (-> exited), cleanup (-> slot freed on the node), report (-> the
// heartbeat carrying the end built), transit (launch sent -> exit stored, less the node's share).
// Only phases whose both ends are known; when all are, they sum to exit_stored - submitted.
using Phase = std::pair<std::string, int64_t>;
std::vector<Phase> PhaseDurations(const LaunchPhases& p);

// The record of an attempt whose head reported its end `f` at `now`. `job` is the job as it was
// before the end was applied; `sent` the job's latest launch_sent event (none from an older
// server: placement and dispatch are then unknown).
LaunchPhases PhasesAtEnd(const JobRecord& job, const std::optional<EventRecord>& sent,
                         const api::FinishedJob& f, int64_t now);

nlohmann::json ToStoredJson(const LaunchPhases& p);
std::optional<LaunchPhases> FromStoredJson(const nlohmann::json& j);

// What the job's view shows: the current attempt's record once it ended, else what is known of
// its launch so far (placement, dispatch, running); nullopt before its first launch.
std::optional<LaunchPhases> PhasesForView(const JobRecord& job,
                                          const std::optional<EventRecord>& phases,
                                          const std::optional<EventRecord>& sent);

// `launch_phases` of GET /v1/jobs/{id} (docs/api/openapi.yaml, LaunchPhases).
nlohmann::json ToJson(const LaunchPhases& p);

// The two event reads PhasesForView needs, for one job.
Result<std::optional<LaunchPhases>> LoadLaunchPhases(UnitOfWork& uow, const JobRecord& job);

}  // namespace controlplane::service
