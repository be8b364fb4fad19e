// embody-sdk-local-api-fixture: the agent's real job-local API and checkpoint uploader, alone,
// for the Python SDK's tests. What the SDK posts is judged by agent::LocalApi itself (the same
// token check, event rules and queue), and the checkpoints it reports are uploaded by
// agent::CheckpointUploader into a directory store, as a node's agent would into the blob store.
//
//   embody-sdk-local-api-fixture JOB_ID TOKEN CHECKPOINTS_ROOT STORE_DIR MAX_EVENTS
//
// Prints {"port": P} once listening on 127.0.0.1, then serves until stdin closes; then waits for
// the uploads to finish and prints {"events": [...queued, oldest first], "uploaded": N,
// "failed": N, "stored": [{"step","bytes","sha256","metrics"}...]}. The job's checkpoint
// directory is CHECKPOINTS_ROOT/job-JOB_ID, as on a node. MAX_EVENTS bounds the event queue (a
// small one makes the API answer 429 while it is full of events that are not steps).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/node/agent_metrics.h"
#include "agent/data/checkpoint_uploader.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/local_api/local_api.h"
#include "storage/checkpoint_dir_store.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s JOB_ID TOKEN CHECKPOINTS_ROOT STORE_DIR MAX_EVENTS\n", argv[0]);
    return 2;
  }
  const int64_t job_id = std::strtoll(argv[1], nullptr, 10);
  const std::string token = argv[2];
  agent::EventQueue events(std::strtoull(argv[5], nullptr, 10));
  agent::AgentMetrics metrics;
  storage::DirCheckpointStore store(argv[4]);
  agent::CheckpointUploader uploader({.checkpoints_root = argv[3]}, &store);
  agent::LocalApi api(
      [&](int64_t id) -> std::optional<agent::JobIdentity> {
        if (id == job_id) return agent::JobIdentity{token, "tenant"};
        return std::nullopt;
      },
      &events, &metrics);
  api.SetEventObserver(
      [&](int64_t id, const nlohmann::json& event) { uploader.Observe(id, event); });
  auto port = api.Start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", port.status().ToString().c_str());
    return 1;
  }
  std::cout << nlohmann::json{{"port", *port}}.dump() << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
  }
  uploader.WaitIdle(std::chrono::seconds(30));
  api.Stop();

  nlohmann::json out{{"events", nlohmann::json::array()},
                     {"uploaded", uploader.uploaded()},
                     {"failed", uploader.failed()},
                     {"stored", nlohmann::json::array()}};
  for (const auto& e : events.Peek(SIZE_MAX).events) out["events"].push_back(e.data);
  if (auto stored = store.List(job_id); stored.ok()) {
    for (const auto& c : *stored) {
      out["stored"].push_back(
          {{"step", c.step}, {"bytes", c.bytes}, {"sha256", c.sha256}, {"metrics", c.metrics}});
    }
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
