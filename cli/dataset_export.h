// `embody datasets export ID DIR --format lerobot`: downloads a ready dataset version (its
// dataset.json and every shard its manifest lists, GET /v1/datasets/{id}/files/{name}, in
// ranged pieces) into a hidden directory beside DIR, checks each file's size and the shards'
// checksums against the manifest, writes the LeRobot v3.0 dataset into DIR in this process
// (storage/lerobot_export.h), and removes the download.
//
// An interrupted download is continued by running the same command again: the hidden directory
// is named after the dataset (.DIR.download-ID), and files already there are resumed from their
// size. A server that cannot read the dataset root (datasets live on the nodes) refuses with
// 409 and says so; then `embody-data export-lerobot` on a node that mounts the root is the way.
// Progress goes to `err`.
#pragma once

#include <iosfwd>

#include "cli/api_client.h"
#include "cli/command_line.h"

namespace cli {

// Returns the exit code (0, or kExitRefused with the reason on `err`).
int ExportDataset(const Invocation& inv, ApiClient& api, std::ostream& out, std::ostream& err);

}  // namespace cli
