#include "cli/dataset_export.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "cli/format.h"
#include "storage/dataset_reader.h"
#include "storage/lerobot_export.h"
#include "storage/manifest.h"

namespace cli {

namespace {

namespace fs = std::filesystem;
using common::Status;
using nlohmann::json;

constexpr int64_t kPieceBytes = 8 << 20;  // one ranged GET
constexpr int kAttempts = 4;              // per piece, for a lost connection or a 5xx

int Refused(std::ostream& err, const Status& s) {
  err << "\nembody: " << RefusalText(s) << "\n";
  return kExitRefused;
}

// Downloads `name` of dataset `id` into `path`, from the bytes already there, to `size` bytes.
Status Download(ApiClient& api, int64_t id, const std::string& name, const std::string& path,
                int64_t size, std::ostream& err) {
  std::error_code ec;
  int64_t have = fs::exists(path, ec) ? static_cast<int64_t>(fs::file_size(path, ec)) : 0;
  if (have > size) {
    fs::remove(path, ec);  // not the file the manifest lists: start over
    have = 0;
  }
  std::ofstream f(path, std::ios::binary | std::ios::app);
  if (!f) return common::Internal("cannot write " + path);
  const std::string url = "/v1/datasets/" + std::to_string(id) + "/files/" + name;
  int failures = 0;
  while (have < size) {
    const int64_t end = std::min(size, have + kPieceBytes) - 1;
    auto piece = api.GetBytes(url, {{"Range", "bytes=" + std::to_string(have) + "-" +
                                                  std::to_string(end)}});
    if (!piece.ok()) {
      const auto code = piece.status().code();
      if ((code == common::Code::kUnavailable || code == common::Code::kInternal) &&
          ++failures < kAttempts) {
        err << "embody: " << name << ": " << piece.status().message() << "; retrying\n";
        continue;
      }
      return piece.status();
    }
    failures = 0;
    if (piece->empty() || static_cast<int64_t>(piece->size()) > end - have + 1) {
      return common::Internal(name + ": the server sent " + std::to_string(piece->size()) +
                              " bytes for a range of " + std::to_string(end - have + 1));
    }
    f.write(piece->data(), static_cast<std::streamsize>(piece->size()));
    if (!f) return common::Internal("cannot write " + path);
    have += static_cast<int64_t>(piece->size());
  }
  f.close();
  if (!f) return common::Internal("cannot write " + path);
  return Status::Ok();
}

}  // namespace

int ExportDataset(const Invocation& inv, ApiClient& api, std::ostream& out, std::ostream& err) {
  const int64_t id = inv.id;
  std::error_code ec;
  const fs::path dir = fs::absolute(fs::path(inv.path).lexically_normal(), ec);
  if (ec || dir.filename().empty()) {
    return Refused(err, common::InvalidArgument(inv.path + ": not a directory name", "DIR"));
  }
  if (fs::exists(dir, ec) && (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec))) {
    return Refused(err, common::InvalidArgument(
                            inv.path + ": exists and is not an empty directory", "DIR"));
  }
  auto d = api.Get("/v1/datasets/" + std::to_string(id));
  if (!d.ok()) return Refused(err, d.status());
  if (d->value("state", "") != "ready" || !(*d)["manifest"].is_object()) {
    return Refused(err, common::FailedPrecondition("dataset " + std::to_string(id) + " is " +
                                                   d->value("state", "?") +
                                                   "; only a ready dataset can be exported"));
  }
  auto manifest = storage::DatasetManifest::FromJson((*d)["manifest"]);
  if (!manifest.ok()) return Refused(err, manifest.status());

  fs::create_directories(dir.parent_path(), ec);
  const fs::path tmp =
      dir.parent_path() / ("." + dir.filename().string() + ".download-" + std::to_string(id));
  fs::create_directories(tmp, ec);
  if (ec) return Refused(err, common::Internal("mkdir " + tmp.string() + ": " + ec.message()));

  uint64_t total = 0, done = 0;
  for (const auto& s : manifest->shards) total += s.bytes;
  err << "downloading dataset " << id << " (" << manifest->shards.size() << " shards, "
      << total / 1048576.0 << " MiB) into " << tmp.string() << "\n";
  // The manifest first, as the server holds it; its size is not in the manifest itself, so it
  // is fetched whole each time (it is small).
  fs::remove(tmp / storage::kManifestFile, ec);
  {
    auto bytes = api.GetBytes("/v1/datasets/" + std::to_string(id) + "/files/" +
                              storage::kManifestFile, {});
    if (!bytes.ok()) {
      err << "embody: the dataset's files cannot be downloaded from this server";
      if (bytes.status().code() == common::Code::kFailedPrecondition) {
        err << "; on a node that mounts the dataset root run `embody-data export-lerobot "
            << d->value("path", "DATASET_DIR") << " " << inv.path << "`";
      }
      err << "\n";
      return Refused(err, bytes.status());
    }
    std::ofstream f(tmp / storage::kManifestFile, std::ios::binary);
    f << *bytes;
    if (!f) return Refused(err, common::Internal("cannot write " + tmp.string()));
  }
  for (const auto& s : manifest->shards) {
    const std::string path = (tmp / s.file).string();
    Status st = Download(api, id, s.file, path, static_cast<int64_t>(s.bytes), err);
    if (!st.ok()) {
      err << "embody: the download is kept in " << tmp.string()
          << "; run the same command again to continue it\n";
      return Refused(err, st);
    }
    done += s.bytes;
    err << "downloaded " << s.file << " (" << done / 1048576.0 << " / " << total / 1048576.0
        << " MiB)\n";
  }

  // Sizes are the manifest's by construction; the shards' checksums are checked here: the index
  // against the manifest at open, every chunk by Verify.
  auto ds = storage::Dataset::Open(tmp.string());
  Status st = ds.ok() ? (*ds)->Verify() : ds.status();
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    err << "embody: the downloaded files do not match the manifest; they were removed\n";
    return Refused(err, st);
  }
  ds->reset();

  storage::LerobotExportOptions options;
  options.fps = inv.fps;
  if (!inv.codec.empty()) options.codec = inv.codec;
  int last_pct = -1;
  options.progress = [&err, &last_pct](const storage::ImportProgress& p) {
    const int pct = static_cast<int>(100 * p.demos_done / std::max<uint64_t>(1, p.demos_total));
    if (pct / 10 == last_pct / 10 && p.demos_done != p.demos_total) return;
    last_pct = pct;
    err << "export: " << p.demos_done << "/" << p.demos_total << " episodes (" << pct << "%), "
        << p.frames << " frames\n";
  };
  auto r = storage::ExportLerobot(tmp.string(), dir.string(), options);
  fs::remove_all(tmp, ec);
  if (!r.ok()) return Refused(err, r.status());
  if (inv.json) {
    out << json{{"id", id},         {"out", dir.string()}, {"episodes", r->episodes},
                {"frames", r->frames}, {"tasks", r->tasks},   {"fps", r->fps},
                {"video_encoder", r->video_encoder}}
               .dump()
        << "\n";
  } else {
    out << "dataset " << id << " exported to " << dir.string() << " as LeRobot v3.0: "
        << r->episodes << " episodes, " << r->frames << " frames, " << r->tasks << " tasks"
        << (r->video_encoder.empty() ? "" : ", video " + r->video_encoder) << "\n";
  }
  return 0;
}

}  // namespace cli
