// An OCI image pulled from a registry the operator configured (docs/byo.md "An OCI image"),
// by the agent that runs its import job. The import job's spec carries
//   import.source {"format": "oci", "registry": NAME, "reference": "REPO:TAG" | "REPO@sha256:..",
//                  "registry_url": "https://HOST[:PORT]" | "http://HOST[:PORT]"}
// which the server wrote from its --image-registry list; before the job starts, the agent runs
//   skopeo copy docker://HOST/REPO:TAG oci-archive:<root-only dir>/upload.tar
// for this node's platform (linux and its architecture), and the archive then goes the way of
// an uploaded image tar (dataset_upload_fetch.h): handed to the job read-only, unpacked and
// checked by `embody-data import-oci`, published whole or not at all. So a pulled image passes
// the same checks as an uploaded one, and the job's uid never holds registry credentials.
//
// skopeo parses what a registry answers, and a registry is not to be trusted: where the agent
// runs jobs under uids of their own it runs skopeo under one too (`run_as`, a uid of the job uid
// pool held for the pull), never as root. Its only writable place is a fresh private directory
// (`archive`.skopeo, 0700, the uid's), holding its HOME, TMPDIR and XDG_RUNTIME_DIR, a copy of the
// operator's credentials made for it, and the archive it writes; the agent then takes the archive
// out of it only if it is a plain file of that uid with one link (not a link to a file of the
// node's), makes it root's and 0600, and removes the rest. Nothing of the agent's environment:
// PATH=/usr/bin:/bin, an empty registries.conf (no mirrors or short names: the host the server
// named is the one contacted), a policy that accepts the image (the digests are checked by the
// import), credentials only from the operator's --image-registry-auth file (anonymous without
// one), a deadline after which it is killed with its process group, and its output kept for the
// error when it fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/sandbox/spawn.h"
#include "api/image_reference.h"
#include "common/status.h"

namespace agent {

struct RegistryPull {
  int64_t dataset_id = 0;
  api::ImageRegistry registry;
  api::ImageReference reference;
};

// Whether `spec` is an import job pulling from a registry (well formed or not).
bool IsRegistryPull(const nlohmann::json& spec);

// The pull `spec` names, re-checked as the server's own parse does (the reference can never be
// read as an option). invalid_argument for a spec that is no well-formed pull.
common::Result<RegistryPull> RegistryPullOf(const nlohmann::json& spec);

struct RegistryPullOptions {
  std::string skopeo = "skopeo";       // --skopeo
  std::string auth_file;               // --image-registry-auth: containers-auth.json; "": anonymous
  std::chrono::seconds timeout{1800};  // --image-pull-timeout-s
  // The largest file skopeo may write (RLIMIT_FSIZE: the archive, each blob it stages), so a
  // registry answering with an endless or huge image fails the pull instead of filling the disk.
  uint64_t max_file_bytes = uint64_t{20} << 30;  // --image-pull-max-gib
  std::string os = "linux";
  std::string arch;  // "": this node's (amd64, arm64, ...)
  // The uid and gid skopeo runs as (no supplementary group); none: the agent's own (an agent
  // that cannot switch uids). The archive's directory must let it pass (0711).
  std::optional<JobCredentials> run_as;
};

// This node's architecture as OCI names it (uname's x86_64 is amd64, aarch64 arm64).
std::string NodeImageArchitecture();

// skopeo's argv for `pull` into the archive `archive`, with its private files in `work_dir`.
std::vector<std::string> SkopeoPullArgv(const RegistryPullOptions& options,
                                        const RegistryPull& pull, const std::string& archive,
                                        const std::string& work_dir);

// Runs the pull into `archive` (which must not exist; nothing is left there on failure; root's
// and 0600 on success), its private files in a fresh `archive`.skopeo directory removed after. `stop` is polled while
// skopeo runs: true kills it (cancelled). failed_precondition with skopeo's own words when it
// fails, deadline_exceeded past the timeout.
common::Status PullImage(const RegistryPullOptions& options, const RegistryPull& pull,
                         const std::string& archive, const std::function<bool()>& stop);

}  // namespace agent
