#include "storage/oci_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/crypto.h"

namespace storage {
namespace {

using common::Result;
using common::Status;
using nlohmann::json;

Status Bad(const std::string& message) {
  return common::InvalidArgument("not a usable OCI image layout: " + message);
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A descriptor's digest and size, checked for shape.
struct Descriptor {
  std::string media_type;
  std::string digest;
  int64_t size = 0;
};

Result<Descriptor> ParseDescriptor(const json& d, const std::string& what) {
  if (!d.is_object()) return Bad(what + " is not an object");
  Descriptor out;
  if (!d.contains("mediaType") || !d["mediaType"].is_string()) {
    return Bad(what + " has no mediaType");
  }
  out.media_type = d["mediaType"].get<std::string>();
  if (!d.contains("digest") || !d["digest"].is_string() ||
      !IsOciDigest(d["digest"].get<std::string>())) {
    return Bad(what + " has no sha256:<64 hex> digest (other digest algorithms are not read)");
  }
  out.digest = d["digest"].get<std::string>();
  if (!d.contains("size") || !d["size"].is_number_integer() || d["size"].get<int64_t>() < 0 ||
      d["size"].get<int64_t>() > kTarMaxFileBytes) {
    return Bad(what + " has no valid size");
  }
  out.size = d["size"].get<int64_t>();
  return out;
}

// Checks that the blob `d` names is a regular file of its size whose SHA-256 is its digest.
Status CheckBlob(const std::string& dir, const Descriptor& d, const std::string& what) {
  const std::string path = dir + "/blobs/sha256/" + d.digest.substr(7);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Bad(what + " " + d.digest + " is not in blobs/sha256/");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Bad(what + " " + d.digest + " is not a regular file");
  }
  if (st.st_size != d.size) {
    ::close(fd);
    return Bad(what + " " + d.digest + " holds " + std::to_string(st.st_size) +
               " bytes, its descriptor says " + std::to_string(d.size));
  }
  common::Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return common::Internal("cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  if ("sha256:" + sha.FinalHex() != d.digest) {
    return Bad(what + " " + d.digest + " does not hash to its digest (damaged)");
  }
  return Status::Ok();
}

// A small JSON document: a file of the layout, or a blob already checked.
Result<json> ReadDocument(const std::string& path, const std::string& what) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || !std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    return Bad("no " + what);
  }
  if (size > static_cast<uintmax_t>(kOciMaxDocumentBytes)) {
    return Bad(what + " is over " + std::to_string(kOciMaxDocumentBytes) + " bytes");
  }
  std::string text;
  text.resize(size);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Bad("cannot open " + what);
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != text.size()) return Bad("cannot read " + what);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Bad(what + " is not a JSON object");
  return j;
}

bool IsLayerType(const std::string& t) {
  return t == "application/vnd.oci.image.layer.v1.tar" ||
         t == "application/vnd.oci.image.layer.v1.tar+gzip";
}

}  // namespace

bool IsOciDigest(const std::string& digest) {
  return digest.size() == 71 && digest.compare(0, 7, "sha256:") == 0 && IsHex64(digest.substr(7));
}

Result<OciImage> CheckOciLayout(const std::string& dir) {
  EMBODY_ASSIGN_OR_RETURN(layout, ReadDocument(dir + "/oci-layout", "oci-layout file"));
  if (layout.value("imageLayoutVersion", json()) != "1.0.0") {
    return Bad("oci-layout does not say imageLayoutVersion 1.0.0 (a `docker save` tar is not an "
               "OCI layout: convert it with `skopeo copy docker-archive:IN.tar oci-archive:OUT.tar`"
               " or save with `podman save --format oci-archive`)");
  }
  EMBODY_ASSIGN_OR_RETURN(index, ReadDocument(dir + "/index.json", "index.json"));
  if (!index.contains("manifests") || !index["manifests"].is_array()) {
    return Bad("index.json has no manifests list");
  }
  const json& manifests = index["manifests"];
  if (manifests.size() != 1) {
    return Bad("index.json names " + std::to_string(manifests.size()) +
               " manifests; export exactly one image (one tag, one platform)");
  }
  EMBODY_ASSIGN_OR_RETURN(top, ParseDescriptor(manifests[0], "index.json's manifest"));
  if (top.media_type == kOciIndexMediaType) {
    return Bad("index.json names a multi-platform image index; export one platform (e.g. "
               "`skopeo copy --override-arch amd64 ...`)");
  }
  if (top.media_type != kOciManifestMediaType) {
    return Bad("index.json's manifest has media type " + top.media_type + ", not " +
               kOciManifestMediaType);
  }
  if (top.size > kOciMaxDocumentBytes) return Bad("the image manifest is too large");
  EMBODY_RETURN_IF_ERROR(CheckBlob(dir, top, "the image manifest"));
  EMBODY_ASSIGN_OR_RETURN(
      manifest, ReadDocument(dir + "/blobs/sha256/" + top.digest.substr(7), "image manifest"));
  if (manifest.value("schemaVersion", json()) != 2) {
    return Bad("the image manifest is not schemaVersion 2");
  }
  if (!manifest.contains("config")) return Bad("the image manifest has no config");
  EMBODY_ASSIGN_OR_RETURN(config, ParseDescriptor(manifest["config"], "the image config"));
  if (config.media_type != kOciConfigMediaType) {
    return Bad("the image config has media type " + config.media_type + ", not " +
               kOciConfigMediaType);
  }
  if (config.size > kOciMaxDocumentBytes) return Bad("the image config is too large");
  EMBODY_RETURN_IF_ERROR(CheckBlob(dir, config, "the image config"));
  EMBODY_ASSIGN_OR_RETURN(
      cfg, ReadDocument(dir + "/blobs/sha256/" + config.digest.substr(7), "image config"));
  OciImage image;
  image.digest = top.digest;
  image.manifest_bytes = top.size;
  image.os = cfg.value("os", "");
  image.architecture = cfg.value("architecture", "");
  if (image.os != "linux") return Bad("the image is for os \"" + image.os + "\", not linux");
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) {
    return Bad("the image manifest has no layers list");
  }
  if (manifest["layers"].size() > static_cast<size_t>(kOciMaxLayers)) {
    return Bad("the image has more than " + std::to_string(kOciMaxLayers) + " layers");
  }
  image.bytes = top.size + config.size;
  for (size_t i = 0; i < manifest["layers"].size(); ++i) {
    const std::string what = "layer " + std::to_string(i);
    EMBODY_ASSIGN_OR_RETURN(layer, ParseDescriptor(manifest["layers"][i], what));
    if (!IsLayerType(layer.media_type)) {
      return Bad(what + " has media type " + layer.media_type +
                 " (plain or gzip-compressed tar layers are read)");
    }
    EMBODY_RETURN_IF_ERROR(CheckBlob(dir, layer, what));
    image.bytes += layer.size;
    ++image.layers;
  }
  return image;
}

Result<OciImage> ImportOciArchive(const std::string& archive, const std::string& out_dir,
                                  const TarLimits& limits) {
  EMBODY_ASSIGN_OR_RETURN(stats, ExtractTar(archive, out_dir, limits));
  (void)stats;
  auto image = CheckOciLayout(out_dir);
  if (!image.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(out_dir, ec);
  }
  return image;
}

json OciManifestJson(const OciImage& image) {
  return json{{"format", "oci"},
              {"image",
               {{"digest", image.digest},
                {"manifest_bytes", image.manifest_bytes},
                {"layers", image.layers},
                {"bytes", image.bytes},
                {"architecture", image.architecture},
                {"os", image.os}}},
              {"stats", {{"episodes", 0}, {"frames", 0}}},
              {"keys", json::array()},
              {"shards", json::array()}};
}

}  // namespace storage
