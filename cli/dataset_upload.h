// `embody datasets upload NAME FILE`: sends a local HDF5 file to the server in chunks
// (docs/storage.md "Uploading a file"), then commits it, which starts its import job. With
// `--format lerobot` FILE is a LeRobot dataset directory, sent as a tar stream built on the fly
// (directory_tar.h), or a tar of one made elsewhere, sent as it is.
//
// The file's size and SHA-256 are declared first; each chunk carries its own SHA-256. After a
// failed chunk (connection lost, 5xx, a refusal of the offset) the upload asks the server how
// many bytes it holds and goes on from there, a few times in a row. Interrupted altogether, it is
// continued by running the same command with `--resume ID`, which checks that the version is
// still uploading this very file (or directory) and starts from its received_bytes. Progress goes to `err`.
#pragma once

#include <iosfwd>

#include "cli/api_client.h"
#include "cli/command_line.h"

namespace cli {

// Returns the exit code (0, or kExitRefused with the reason on `err`).
int UploadDataset(const Invocation& inv, ApiClient& api, std::ostream& out, std::ostream& err);

}  // namespace cli
