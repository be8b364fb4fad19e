// Checkpoints in the server's blob store: uploads by the agents of the nodes a job runs on,
// listing and download by the job's tenant, retention, and what a launch resumes from.
//
// Who may (a job of another tenant, or one a node was never placed on, is not found):
//   upload (start, chunks, commit)   the credential of a node where the job's latest attempt runs
//                                     or ran (its agent uploads in the background, also after
//                                     the job ended)
//   list, entry, download            people of the job's tenant, viewer and up (cluster-admins
//                                     any); a node where the job runs; a node running a job of the
//                                     same tenant whose spec names the checkpoint in init_from
//   delete                           members and up of the tenant; a node where the job runs
//
// Bounds (server flags, CheckpointLimits): bytes per checkpoint, checkpoints per job (uploading
// or ready), bytes per tenant (a server-wide per-tenant quota over uploading and ready rows),
// chunk size, and how long an upload may sit untouched before it is swept (rows and files). The
// tenant's own quota.storage_bytes (storage_quota.h) applies as well, over its datasets too.
//
// A torn upload is never listed: only a commit that finds every declared byte and the declared
// SHA-256 makes a checkpoint ready; a commit whose SHA-256 differs discards the upload.
// Retention runs at each commit: the newest engine.checkpoint.keep ready checkpoints of the job
// stay, plus the best by engine.checkpoint.best when the spec names one; the rest are deleted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/v1/checkpoint.h"
#include "controlplane/service/checkpoint_files.h"
#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct CheckpointLimits {
  int64_t max_bytes = int64_t{16} << 30;            // one checkpoint
  int64_t tenant_quota_bytes = int64_t{256} << 30;  // all of a tenant's uploading + ready
  int max_per_job = 64;                             // uploading + ready
  int64_t max_chunk_bytes = int64_t{8} << 20;
  int64_t upload_ttl_ms = 3600 * 1000;  // an upload untouched this long is swept
};

struct CheckpointDownload {
  CheckpointBlob blob;
  std::shared_ptr<BlobReader> reader;
};

class CheckpointsService {
 public:
  CheckpointsService(Database& db, const CheckpointFiles& files, CheckpointLimits limits, Clock now)
      : db_(db), files_(files), limits_(limits), now_(std::move(now)) {}

  // body {"step", "bytes", "sha256", "metrics"?} -> the new entry (state "uploading").
  Result<api::v1::Checkpoint> StartUpload(const Principal& p, int64_t job_id,
                                          const std::string& body);
  // One chunk at `offset` (must equal the bytes held); `chunk_sha256` is its hex SHA-256.
  // -> the bytes now held.
  Result<api::v1::CheckpointUploadProgress> PutChunk(const Principal& p, int64_t job_id,
                                                     int64_t id, int64_t offset,
                                                     const std::string& chunk_sha256,
                                                     const std::string& data);
  // body {"sha256"?}: when given, the whole file's SHA-256 as the uploader computed it; it must
  // be the one declared at the start.
  Result<api::v1::Checkpoint> Commit(const Principal& p, int64_t job_id, int64_t id,
                                     const std::string& body = "");
  // The ready entries, ascending by step.
  Result<api::v1::CheckpointList> List(const Principal& p, int64_t job_id);
  Result<api::v1::Checkpoint> Entry(const Principal& p, int64_t job_id, int64_t id);
  Result<CheckpointDownload> OpenData(const Principal& p, int64_t job_id, int64_t id);
  Status Delete(const Principal& p, int64_t job_id, int64_t id);

  // Removes uploads untouched for upload_ttl_ms (at most `limit`); returns how many.
  Result<int> SweepStale(int limit = 100);

 private:
  // kRead: a checkpoint's metadata; kDownload: its bytes. A node (scoped to now, see JobFor):
  // downloads only for a job placed on it now (or a job placed on it now that starts from the
  // checkpoint); reads and uploads for the latest attempt it ran, until an hour after the job
  // ended (its last checkpoint is uploaded after the exit); never deletes.
  enum class Access { kRead, kDownload, kUpload, kDelete };
  // The job, if `p` may act on it as `access` (for kRead on checkpoint `id`, a node running an
  // init_from job of the same tenant counts too); not_found otherwise.
  Result<JobRecord> JobFor(UnitOfWork& uow, const Principal& p, int64_t job_id, Access access,
                           int64_t checkpoint_id = 0);
  Result<CheckpointBlob> BlobOf(UnitOfWork& uow, const JobRecord& job, int64_t id, bool for_update);
  // Deletes the ready checkpoints retention does not keep; returns them (files go after commit).
  Result<std::vector<CheckpointBlob>> ApplyRetention(UnitOfWork& uow, const JobRecord& job);

  Database& db_;
  const CheckpointFiles& files_;
  const CheckpointLimits limits_;
  Clock now_;
};

// The entry as the API shows it (api/v1/checkpoint.h); internal when its stored metrics are not
// the numbers StartUpload let in.
Result<api::v1::Checkpoint> CheckpointView(const CheckpointBlob& c);

// The checkpoint a launch of `job` starts from through the blob store: its latest ready upload,
// else the spec's init_from (when it is still ready and of the job's tenant); id 0: none.
Result<api::CheckpointRef> ResumeCheckpointFor(UnitOfWork& uow, const JobRecord& job);

// not_found unless checkpoint `id` is ready and belongs to `tenant_id` (init_from at submit).
Status CheckInitFrom(UnitOfWork& uow, int64_t tenant_id, int64_t id);

}  // namespace controlplane::service
