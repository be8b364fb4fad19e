// What a job needs before it can start, fetched on its preparer thread (job_runner.h) so that
// heartbeats and other jobs go on meanwhile: an image job's image unpacked in the node's cache
// (and, for a multi-node job, on every other node), a blob-store checkpoint to resume from, the
// upload an import job reads, or the image an import job pulls from a registry.
//
// Each call is the slow half of a stage, run without the runner's lock; the runner then takes its
// lock, looks whether the job was killed meanwhile and either ends it or goes on. So a result
// carries the job's end reason ready made, and the preparer touches no job state. `stop` polls
// the job's kill (it takes the runner's lock). Thread-safe: it reads only its options.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent/images/image_cache.h"
#include "agent/jobs/job_runner_options.h"
#include "agent/launch/mpi_launch.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

class JobPreparer {
 public:
  // `options` must outlive the preparer.
  explicit JobPreparer(const JobRunnerOptions& options) : options_(options) {}

  // Whether the launch needs an input fetched before it starts: an import's upload or registry
  // pull (when this agent can fetch it), or a resume_checkpoint, unless the job's own checkpoint
  // at resume_from is readable here and at least as new.
  bool NeedsFetch(const api::Command& launch) const;

  // Unpacks (or finds) the job's image in the node's cache and holds it; the error's message is
  // the job's end reason ("cannot prepare image NAME: why").
  common::Result<std::unique_ptr<ImageUse>> AcquireImage(int64_t job_id,
                                                         const ImageRef& image) const;

  // A multi-node image job: waits until every other node of `launch` has the image
  // (agent/images/peer_images.h), or `stop`; the error's message is the job's end reason.
  common::Status WaitForPeerImages(int64_t job_id, const api::Command& launch,
                                   const ImageRef& image, const std::function<bool()>& stop) const;

  struct Fetched {
    api::Command launch;    // the launch, rewritten to read what was fetched
    common::Status status;  // not ok: the job ends with `reason`, logged as `log_message`
    std::string reason;
    std::string log_message;
    // An import's fetched copy (root's) and where the job will read it: set even when the fetch
    // failed, so the job's end removes what was written.
    std::string upload_fetched;
    std::string upload_copy;
  };
  // Fetches what NeedsFetch wants into the job's download directory: an import's upload or
  // registry pull (the spec then names the job's copy), else the resume checkpoint (resume_from
  // then names the file).
  Fetched Fetch(int64_t job_id, api::Command launch, const std::function<bool()>& stop) const;

 private:
  Fetched FetchUpload(int64_t job_id, api::Command launch, const UploadRef& ref) const;
  Fetched Pull(int64_t job_id, api::Command launch, const std::function<bool()>& stop) const;
  Fetched FetchCheckpoint(int64_t job_id, api::Command launch) const;

  const JobRunnerOptions& options_;
};

}  // namespace agent
