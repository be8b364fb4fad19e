// The bytes of a dataset upload (docs/storage.md "Uploading a file"), fetched by the agent that
// runs its import job. The import job's spec carries import.source.upload {"bytes","sha256"}
// instead of a path; before the job starts, the agent downloads
//   GET /v1/datasets/{id}/upload   (its node credential; the server answers only the node the
//                                   import job was placed on, while it imports)
// into a root-only file, checks size and SHA-256, and then hands that copy to the job inside its
// private directory (0700, the job's uid) with the spec's source rewritten to the copy's path. So
// an upload needs no file system shared between server and nodes, and no other job on the node
// can read it. The copy goes when the job ends. A LeRobot upload is a tar of the dataset
// directory: the job's embody-data unpacks it (as the job's uid, inside its staging directory)
// before importing, and removes what it unpacked.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/sandbox/sandbox.h"
#include "common/status.h"

namespace agent {

struct UploadRef {
  int64_t dataset_id = 0;
  int64_t bytes = 0;
  std::string sha256;
};

// The upload an import job's spec names; nullopt for any other spec (a path import included).
std::optional<UploadRef> UploadOf(const nlohmann::json& spec);

// `spec` with import.source naming `local_path` instead of the upload or the registry pull
// (filter and language kept).
nlohmann::json SpecReadingCopy(const nlohmann::json& spec, const std::string& local_path);

// The node copy's file name: "upload.tar" for a LeRobot upload (a tar of the dataset directory,
// which embody-data unpacks with --tar) and an OCI image (a layout tar), "upload.hdf5" otherwise.
std::string UploadFileName(const nlohmann::json& spec);

struct UploadFetchOptions {
  std::string server_url;              // http://host:port or https://host:port
  std::string ca_file;                 // https: the CAs the server must chain to; "": system's
  std::function<std::string()> token;  // the node credential, read at each request
  int max_retries = 5;                 // interrupted downloads resume with Range
  std::chrono::milliseconds first_backoff{200};
  std::chrono::seconds timeout{60};
};

// Downloads `ref` into `local_path` (created 0600 with O_EXCL|O_NOFOLLOW; it must not exist) and
// checks its size and SHA-256; on any failure nothing is left at local_path.
common::Status FetchUpload(const UploadFetchOptions& options, const UploadRef& ref,
                           const std::string& local_path);

// Moves the fetched copy to `job_path` (inside the job's private directory, same file system)
// and gives it to `owner` read-only (the agent's own uid when nullopt).
common::Status HandUploadToJob(const std::string& fetched, const std::string& job_path,
                               const std::optional<JobCredentials>& owner);

}  // namespace agent
