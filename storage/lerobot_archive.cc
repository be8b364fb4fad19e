#include "storage/lerobot_archive.h"

#include <filesystem>

#include "storage/lerobot_dataset.h"

namespace storage {

namespace {

namespace fs = std::filesystem;

bool HoldsDataset(const std::string& dir) {
  std::error_code ec;
  return fs::exists(dir + "/meta/info.json", ec) || fs::exists(dir + "/episodes.jsonl", ec);
}

// Removes the unpacked copy on every way out.
struct RemoveOnExit {
  std::string dir;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

common::Result<ImportResult> ImportLerobotArchive(const std::string& archive,
                                                  const std::string& out_dir,
                                                  const std::string& unpack_dir,
                                                  VideoEpisodesImportOptions options,
                                                  const TarLimits& limits) {
  EMBODY_ASSIGN_OR_RETURN(unpacked, ExtractTar(archive, unpack_dir, limits));
  RemoveOnExit cleanup{unpack_dir};
  std::string root = unpack_dir;
  if (!HoldsDataset(root)) {
    // One directory at the top holding the dataset: the archive of `tar -cf x.tar pusht/`.
    std::error_code ec;
    std::vector<fs::path> top;
    for (const auto& e : fs::directory_iterator(root, ec)) top.push_back(e.path());
    if (top.size() == 1 && fs::is_directory(fs::symlink_status(top[0], ec)) &&
        HoldsDataset(top[0].string())) {
      root = top[0].string();
    } else {
      return common::InvalidArgument(
          archive + ": no LeRobot dataset in it (" + std::to_string(unpacked.files) +
          " files; expected meta/info.json, or episodes.jsonl, at its top or in its one "
          "top-level directory)");
    }
  }
  options.source_archive = archive;
  return ImportLerobot(root, out_dir, options);
}

}  // namespace storage
