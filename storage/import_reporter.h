// ImportReporter: how `embody-data import-hdf5 --report` tells the control plane about an import
// run as a job: progress, then the final manifest or the error, posted as job events to the
// node agent's job-local API (EMBODY_AGENT_URL, EMBODY_JOB_ID, EMBODY_JOB_TOKEN, the same
// variables the engine reads):
//
//   {"type":"progress","fraction":0.25,"demos_done":1,"demos_total":4,"frames":12,"bytes":...}
//   {"type":"dataset","manifest":{...dataset.json...}}   or   {"type":"dataset","error":"..."}
//
// Calls are synchronous (an import posts a few dozen times). Compiled into the embody-data tool
// only: the storage library itself never speaks HTTP.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace common::http {
class Client;
}

namespace storage {

// The largest manifest sent whole; a bigger one goes without its per-shard list and token
// histogram (both stay in dataset.json), with "truncated": true. The server keeps events of at
// most 64 KiB.
inline constexpr size_t kMaxReportedManifestBytes = 56 * 1024;

class ImportReporter {
 public:
  // failed_precondition when the environment names no agent or job.
  static common::Result<std::unique_ptr<ImportReporter>> FromEnv();
  ~ImportReporter();

  common::Status Progress(uint64_t demos_done, uint64_t demos_total, uint64_t frames,
                          uint64_t bytes);
  common::Status Manifest(const nlohmann::json& manifest);
  common::Status Error(const std::string& message);

  // The manifest as reported: whole when small enough, else trimmed as described above.
  static nlohmann::json Reportable(const nlohmann::json& manifest);

 private:
  ImportReporter(std::unique_ptr<common::http::Client> client, std::string path);
  common::Status Post(const nlohmann::json& event);

  std::unique_ptr<common::http::Client> client_;
  std::string path_;
};

}  // namespace storage
