// What names an OCI image in a registry, parsed strictly in one place for the server (the
// operator's --image-registry flags, a tenant's pull in POST /v1/datasets), the agent that runs
// the pull and the CLI.
//
// A registry is one the operator configured: `NAME=URL`, where URL is `https://HOST[:PORT]`
// (TLS, certificates verified) or `http://HOST[:PORT]` (plain HTTP, for a registry on a network
// the operator trusts), and nothing more: no user, path, query or fragment. A tenant names it by
// NAME or by its HOST[:PORT] exactly as configured, and says which image with a reference
//   REPOSITORY:TAG   or   REPOSITORY@sha256:<64 hex>
// in the grammar of the Distribution specification: lower-case path components of letters and
// digits joined by '.', '_', '__' or dashes, separated by '/', at most 255 characters; a tag of
// at most 128 word characters, '.' and '-' that does not start with either. A reference whose
// first component is a host (it holds '.' or ':', or is "localhost", and more components follow)
// is refused: the registry is given apart, so a reference never reaches another host. Nothing
// that parses can start with '-' or hold a space, so a reference passed to a tool's command line
// is never an option.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace api {

inline constexpr size_t kMaxImageRepositoryBytes = 255;
inline constexpr size_t kMaxImageTagBytes = 128;

struct ImageRegistry {
  std::string name;        // [a-z0-9][a-z0-9._-]{0,62}
  std::string host;        // HOST or HOST:PORT, lower case: what goes before the repository
  bool tls_verify = true;  // false for an http:// registry

  // "https://HOST[:PORT]" or "http://HOST[:PORT]".
  std::string Url() const { return (tls_verify ? "https://" : "http://") + host; }
};

struct ImageReference {
  std::string repository;
  std::string tag;     // "" when pinned by digest
  std::string digest;  // "sha256:<hex>", or "" for a tag

  // "REPOSITORY:TAG" or "REPOSITORY@sha256:<hex>".
  std::string ToString() const {
    return digest.empty() ? repository + ":" + tag : repository + "@" + digest;
  }
};

// "NAME=URL" as --image-registry takes it. invalid_argument on `field`.
common::Result<ImageRegistry> ParseImageRegistryFlag(const std::string& text,
                                                     const std::string& field);

// "https://HOST[:PORT]" or "http://HOST[:PORT]" into `name` (as given) with its host and TLS
// verification.
common::Result<ImageRegistry> ParseRegistryUrl(const std::string& name, const std::string& url,
                                               const std::string& field);

// Whether `text` is a registry name as --image-registry takes it.
bool IsImageRegistryName(const std::string& text);

// The reference as described above. invalid_argument on `field`.
common::Result<ImageReference> ParseImageReference(const std::string& text,
                                                   const std::string& field);

// The configured registry a tenant's `text` names (its NAME, or its HOST[:PORT]);
// invalid_argument on `field`, listing the names, when none does.
common::Result<ImageRegistry> FindImageRegistry(const std::vector<ImageRegistry>& registries,
                                                const std::string& text, const std::string& field);

}  // namespace api
