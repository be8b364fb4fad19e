// The node's cache of unpacked OCI images (docs/byo.md "Environments"), under the agent's data
// directory:
//
//   <data-dir>/images/               0711 root
//     <hex>/rootfs/                  an image's root file system, root's, read-only to jobs
//                                    (crun mounts it read-only); <hex> is its manifest digest
//     <hex>/image.json               the image's Env and WorkingDir (ImageRunConfig), from its
//                                    verified config blob
//     .tmp-<hex>-<n>/                one being made: layout/ (the verified blobs) and rootfs/
//
// Acquire copies the blobs the image's manifest names from the version's layout directory (the
// dataset root, where import-oci published it) into a temporary layout, checking each one's
// size and SHA-256 against its digest as it copies (the manifest's against the digest the
// server gave), unpacks it there with `umoci raw unpack --rootless` (umoci refuses layer entries
// that leave the root; each file it writes is bounded by RLIMIT_FSIZE at the cache's size), drops
// the copy of the blobs and renames the directory into place: an image directory exists only
// whole. Jobs of the same image share it; concurrent Acquires of one image wait for the first
// (one mutex per cache, the unpack itself without it, one maker per digest).
//
// Each entry is held while a job uses it. Past max_bytes the least recently acquired entries
// that no job holds are removed (a held one never); at start the cache forgets what it does not
// know (leftover temporaries, and entries without a readable image.json, which are unpacked again
// when next used) and adopts complete entries.
//
// EnsureMountpoints makes, as root, the directories (or empty files) crun mounts the job's paths
// on: crun, as the job's uid, cannot create them in a root-owned read-only tree. It walks from
// the root file system without following any link, and refuses a path the image has a link or a
// file in the way of.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/launch/container_config.h"
#include "common/status.h"

namespace agent {

struct ImageCacheOptions {
  std::string dir;                           // <data-dir>/images
  int64_t max_bytes = int64_t{20} << 30;     // --image-cache-gib
  std::string umoci = "umoci";
};

class ImageCache;

// One job's hold on an entry; released on destruction.
class ImageUse {
 public:
  ~ImageUse();
  ImageUse(const ImageUse&) = delete;
  ImageUse& operator=(const ImageUse&) = delete;
  const std::string& rootfs() const { return rootfs_; }
  const std::string& digest() const { return digest_; }
  // The image's Env and WorkingDir, what ContainerPlan::image carries.
  const ImageRunConfig& config() const { return config_; }

 private:
  friend class ImageCache;
  ImageUse(ImageCache* cache, std::string digest, std::string rootfs, ImageRunConfig config)
      : cache_(cache),
        digest_(std::move(digest)),
        rootfs_(std::move(rootfs)),
        config_(std::move(config)) {}
  ImageCache* cache_;
  std::string digest_;
  std::string rootfs_;
  ImageRunConfig config_;
};

class ImageCache {
 public:
  // Makes `options.dir` (0711) and adopts what is complete in it.
  static common::Result<std::unique_ptr<ImageCache>> Open(const ImageCacheOptions& options);

  // The image `digest` ("sha256:<hex>") of the OCI layout in `layout_dir`, unpacked (once).
  common::Result<std::unique_ptr<ImageUse>> Acquire(const std::string& digest,
                                                    const std::string& layout_dir);

  // Makes `paths` (absolute) inside `rootfs` as directories, and `files` as empty files.
  common::Status EnsureMountpoints(const std::string& rootfs,
                                   const std::vector<std::string>& paths,
                                   const std::vector<std::string>& files);

  // The mount points of the "container" block of a command file (`command_file`, the JSON that
  // BuildLaunchPlan and BuildDaemonPlan write: its init and every bind), and `extra_dirs`, made
  // in that block's root file system as EnsureMountpoints does. invalid_argument for a command
  // file without a valid block.
  common::Status EnsureContainerMountpoints(const std::string& command_file,
                                            const std::vector<std::string>& extra_dirs);

  // Bytes the complete entries take.
  int64_t bytes() const;
  // Digests of the complete entries.
  std::vector<std::string> Entries() const;

 private:
  friend class ImageUse;
  struct Entry {
    int64_t bytes = 0;
    int users = 0;
    uint64_t last_used = 0;
    ImageRunConfig config;
  };
  explicit ImageCache(ImageCacheOptions options) : options_(std::move(options)) {}
  void Release(const std::string& digest);
  void EvictLocked();  // mu_ held
  // Unpacks the image; its size and run config.
  common::Result<std::pair<int64_t, ImageRunConfig>> Make(const std::string& digest,
                                                          const std::string& layout_dir);

  const ImageCacheOptions options_;
  mutable std::mutex mu_;
  std::condition_variable made_;
  std::map<std::string, Entry> entries_;  // by digest
  std::set<std::string> making_;
  uint64_t clock_ = 0;
  int64_t tmp_counter_ = 0;
};

}  // namespace agent
