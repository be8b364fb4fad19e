// A LeRobot dataset sent as a tar of its directory (the upload `embody datasets upload NAME DIR
// --format lerobot` makes; docs/storage.md "Uploading a LeRobot directory"): unpacked with
// tar_reader.h's checks into a scratch directory, imported from there as a directory is, and the
// scratch directory removed again whatever the outcome.
//
// The dataset may sit at the archive's top (meta/info.json, or the older layout's
// episodes.jsonl) or in its one top-level directory (`tar -cf x.tar pusht/`).
#pragma once

#include <string>

#include "common/status.h"
#include "storage/hdf5_importer.h"
#include "storage/lerobot_importer.h"
#include "storage/tar_reader.h"

namespace storage {

// `unpack_dir` must not exist; its parent must (it is created 0700 and removed before this
// returns). The manifest's source names `archive` (VideoEpisodesImportOptions::source_archive).
common::Result<ImportResult> ImportLerobotArchive(const std::string& archive,
                                                  const std::string& out_dir,
                                                  const std::string& unpack_dir,
                                                  VideoEpisodesImportOptions options,
                                                  const TarLimits& limits = {});

}  // namespace storage
