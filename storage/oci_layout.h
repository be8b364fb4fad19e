// An OCI image as a tenant uploads it: a tar of an OCI image layout (oci-layout, index.json,
// blobs/sha256/<hex>: what `umoci`, `skopeo copy ... oci-archive:F` and `podman save --format
// oci-archive` write), stored as a dataset version of format "oci" (docs/byo.md
// "Environments") and run by command jobs naming it.
//
// The import job unpacks the tar with tar_reader.h's checks (no links, devices, absolute names or
// "..") and checks the layout before it is published: `oci-layout` says version 1.0.0;
// index.json names exactly one image manifest (a multi-platform index or several tags are
// refused, saying how to export one); the manifest, its config and every layer are blobs of the
// declared size whose SHA-256 is their name; layers are plain or gzip-compressed tars (what
// umoci unpacks); the image is for linux. Nothing in the layers is unpacked here: the agent that
// runs a job verifies the blobs again as it copies them into its cache and unpacks them with
// umoci (agent/images/image_cache.h), which refuses layer entries that leave the root file system.
//
// This is not a registry client: a pull (agent/data/registry_pull.h) has skopeo write the image as
// such a tar, which is then checked here like any other.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/tar_reader.h"

namespace storage {

inline constexpr char kOciManifestMediaType[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kOciIndexMediaType[] = "application/vnd.oci.image.index.v1+json";
inline constexpr char kOciConfigMediaType[] = "application/vnd.oci.image.config.v1+json";
// The largest index, manifest or config document read (they are small JSON files).
inline constexpr int64_t kOciMaxDocumentBytes = int64_t{4} << 20;
inline constexpr int kOciMaxLayers = 256;

struct OciImage {
  std::string digest;  // of the image manifest, "sha256:<hex>": the image's identity
  int64_t manifest_bytes = 0;
  int layers = 0;
  int64_t bytes = 0;  // manifest, config and layers as stored (compressed)
  std::string architecture;
  std::string os;
};

// Checks the layout in `dir` as described above.
common::Result<OciImage> CheckOciLayout(const std::string& dir);

// Unpacks the tar `archive` into `out_dir` (which must not exist; removed again on failure) and
// checks it with CheckOciLayout.
common::Result<OciImage> ImportOciArchive(const std::string& archive, const std::string& out_dir,
                                          const TarLimits& limits = {});

// The manifest a dataset version of format "oci" reports and the server keeps:
//   {"format": "oci", "image": {"digest", "manifest_bytes", "layers", "bytes", "architecture",
//    "os"}, "stats": {"episodes": 0, "frames": 0}, "keys": [], "shards": []}
nlohmann::json OciManifestJson(const OciImage& image);

// Whether `digest` is "sha256:" and 64 lower-case hex characters.
bool IsOciDigest(const std::string& digest);

}  // namespace storage
