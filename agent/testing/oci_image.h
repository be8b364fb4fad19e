// Test images, built offline with umoci (deploy/setup.sh installs it): an empty image made with
// `umoci new`, the given host files copied into its root file system, repacked, and the layout
// written as a tar (what `embody datasets upload NAME FILE.tar --format oci` sends).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace agent::testing {

// Whether crun and umoci are both on PATH (tests skip, saying so, where not).
bool HaveCrunAndUmoci();

// Builds the image in `work_dir` (created) from `files` (host path -> absolute path in the
// image; each copied 0755) and returns the tar's path. `config` are `umoci config` options for
// the image's configuration (e.g. "--config.env=A=b", "--config.workingdir=/w"), each one
// argument. failed_precondition without umoci.
common::Result<std::string> BuildOciImageTar(
    const std::string& work_dir, const std::vector<std::pair<std::string, std::string>>& files,
    const std::vector<std::string>& config = {});

}  // namespace agent::testing
