#include "agent/testing/oci_image.h"

#include <cstdlib>
#include <filesystem>

namespace agent::testing {
namespace {

int Run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

}  // namespace

bool HaveCrunAndUmoci() {
  return Run("command -v crun") == 0 && Run("command -v umoci") == 0;
}

common::Result<std::string> BuildOciImageTar(
    const std::string& work_dir, const std::vector<std::pair<std::string, std::string>>& files,
    const std::vector<std::string>& config) {
  if (Run("command -v umoci") != 0) return common::FailedPrecondition("umoci is not installed");
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(work_dir, ec);
  fs::create_directories(work_dir, ec);
  const std::string layout = work_dir + "/layout", bundle = work_dir + "/bundle";
  if (Run("umoci init --layout " + layout) != 0 || Run("umoci new --image " + layout + ":t") != 0 ||
      Run("umoci unpack --rootless --image " + layout + ":t " + bundle) != 0) {
    return common::Internal("umoci cannot make an empty image in " + work_dir);
  }
  for (const auto& [host, in_image] : files) {
    const fs::path dest = fs::path(bundle + "/rootfs") / fs::path(in_image).relative_path();
    fs::create_directories(dest.parent_path(), ec);
    fs::copy_file(host, dest, fs::copy_options::overwrite_existing, ec);
    if (ec) return common::Internal("cannot copy " + host + " into the image: " + ec.message());
    fs::permissions(dest, fs::perms(0755), ec);
  }
  const std::string tar = work_dir + "/image.tar";
  std::string configure;
  for (const std::string& option : config) configure += " '" + option + "'";
  if (Run("umoci repack --image " + layout + ":t " + bundle) != 0 ||
      (!config.empty() && Run("umoci config --image " + layout + ":t" + configure) != 0) ||
      Run("umoci gc --layout " + layout) != 0 || Run("tar -cf " + tar + " -C " + layout + " .") != 0) {
    return common::Internal("umoci cannot repack the image in " + work_dir);
  }
  return tar;
}

}  // namespace agent::testing
