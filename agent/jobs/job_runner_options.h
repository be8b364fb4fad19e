// What a node's JobRunner (job_runner.h) is given, shared by the parts it calls: the preparer
// (job_preparer.h), the launcher (job_launcher.h) and the reaper (job_reaper.h) read it, none
// writes it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "agent/data/dataset_upload_fetch.h"
#include "agent/data/registry_pull.h"
#include "agent/images/image_cache.h"
#include "agent/jobs/job_sandbox_options.h"
#include "agent/node/gpu_pool.h"
#include "agent/sandbox/sandbox.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct JobRunnerOptions {
  // What this node's job launches share with its rsh bridge (agent/jobs/job_sandbox_options.h).
  JobSandboxOptions jobs;
  std::string agent_url;     // EMBODY_AGENT_URL given to the ranks
  std::string embody_data;   // embody-data path (import jobs)
  std::string dataset_root;  // where import jobs publish datasets; "" : imports are refused
  // How long a job's processes outlive this agent process before its watcher stops them
  // (agent/jobs/job_watcher.h). No watcher when jobs.rank_exec (the agent binary) is empty.
  std::chrono::milliseconds orphan_grace{3000};
  // The node's GPUs, shared with the rsh bridge (daemons of jobs headed elsewhere take theirs
  // from the same pool); null or empty: a node without GPUs.
  std::shared_ptr<GpuPool> gpus;
  // Writes a blob-store checkpoint (api::Command::resume_checkpoint) to a local path, verified;
  // unset: launches ignore resume_checkpoint.
  std::function<common::Status(const api::CheckpointRef&, const std::string& local_path)>
      fetch_checkpoint;
  // Writes the upload an import job reads (agent/data/dataset_upload_fetch.h) to a local path,
  // verified; unset: such a job fails at once.
  std::function<common::Status(const UploadRef&, const std::string& local_path)> fetch_upload;
  // Pulls the image an import job names from its registry (agent/data/registry_pull.h) into an
  // archive at a local path, polling the stop function; unset: such a job fails at once.
  std::function<common::Status(const RegistryPull&, const std::string& local_path,
                               const std::function<bool()>& stop)>
      pull_image;
  // The uid pool to share with the node's rsh bridge (agent/rsh/rsh_bridge.h), so no uid serves
  // two jobs; null: the runner's own.
  UidPool* uid_pool = nullptr;
  // Where image jobs' images are unpacked (agent/images/image_cache.h); null: such jobs fail,
  // saying so. container_init: embody-container-init, PID 1 of their containers; crun: the
  // runtime.
  ImageCache* images = nullptr;
  std::string container_init;
  std::string crun = "crun";
};

}  // namespace agent
