// embody-data: import robot datasets into shards, and look at or check a dataset directory.
//
//   embody-data import-hdf5 IN.hdf5 OUT_DIR [--filter F] [--shard-mib N] [--language TEXT]
//                           [--patch N] [--max-episode-frames N] [--nan skip|refuse] [--report]
//   embody-data import-lerobot DIR OUT_DIR [--resize HxW] [--threads N] [--chunk-kib N] ...
//                           a LeRobot dataset as LeRobot writes it (meta/info.json, v2.x or
//                           v3.0), or the older episodes.jsonl + videos/<camera>/*.mp4 layout;
//                           import-video is the same command under its first name;
//                           --tar: DIR is a tar of such a directory (an upload), unpacked
//                           safely (storage/tar_reader.h) beside OUT_DIR and removed after;
//                           --report as for import-hdf5
//   embody-data import-oci TAR OUT_DIR [--report]
//                           an OCI image layout tar (storage/oci_layout.h), unpacked safely into
//                           OUT_DIR and checked; the manifest names the image's digest
//   embody-data export-lerobot DATASET_DIR OUT_DIR [--fps N] [--codec av1] ...
//                           the dataset as a LeRobot v3.0 directory (storage/lerobot_export.h)
//   embody-data inspect DIR     the manifest and statistics, as JSON
//   embody-data verify DIR      reads every chunk and checks its checksum
//
// Progress goes to stderr; each command ends with one JSON line on stdout. Exit status 0 on
// success, 1 on a data or I/O error (the message names the file and the episode), 2 on usage.
// With --report (an import run as a job by embody-agent) progress, the manifest and any error
// are also posted to the job-local API (storage/import_reporter.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/hdf5_importer.h"
#include "storage/import_reporter.h"
#include "storage/lerobot_archive.h"
#include "storage/lerobot_dataset.h"
#include "storage/lerobot_export.h"
#include "storage/oci_layout.h"

namespace {

int Fail(const common::Status& st) {
  std::cerr << "embody-data: " << st.message() << "\n";
  return 1;
}

// What every import command shares: progress on stderr every 5% and at the end, and with
// --report the same progress, then the manifest or the error, posted to the agent. `unit`
// ("demos", "episodes") and `read` (" read" after the MiB, or "") keep each command's progress
// line as it always was.
class ImportRun {
 public:
  ImportRun(const char* unit, const char* read) : unit_(unit), read_(read) {}

  // failed_precondition when --report was given but the environment names no agent or job.
  common::Status Start(bool report) {
    if (!report) return common::Status::Ok();
    auto r = storage::ImportReporter::FromEnv();
    if (!r.ok()) return r.status();
    reporter_ = std::move(*r);
    return common::Status::Ok();
  }

  std::function<void(const storage::ImportProgress&)> Progress() {
    return [this](const storage::ImportProgress& p) {
      int pct = static_cast<int>(100 * p.demos_done / std::max<uint64_t>(1, p.demos_total));
      if (pct / 5 == last_pct_ / 5 && p.demos_done != p.demos_total) return;
      last_pct_ = pct;
      std::fprintf(stderr, "import: %llu/%llu %s (%d%%), %llu frames, %.1f MiB%s\n",
                   static_cast<unsigned long long>(p.demos_done),
                   static_cast<unsigned long long>(p.demos_total), unit_, pct,
                   static_cast<unsigned long long>(p.frames), p.bytes / 1048576.0, read_);
      if (reporter_) Note(reporter_->Progress(p.demos_done, p.demos_total, p.frames, p.bytes));
    };
  }

  // Reports the outcome and prints the last stdout line (`line` plus the counts every import
  // has); returns the exit status.
  int Finish(const common::Result<storage::ImportResult>& result, const std::string& out,
             nlohmann::json line) {
    if (!result.ok()) {
      if (reporter_) Note(reporter_->Error(result.status().message()));
      return Fail(result.status());
    }
    if (reporter_) {
      // Without its manifest the control plane cannot mark the dataset ready: that one must
      // arrive.
      common::Status st = reporter_->Manifest(result->manifest.ToJson());
      if (!st.ok()) return Fail(common::Unavailable("cannot report the manifest: " + st.message()));
    }
    line["episodes"] = result->episodes;
    line["frames"] = result->frames;
    line["bytes"] = result->bytes;
    line["shards"] = result->manifest.shards.size();
    line["seconds"] = result->seconds;
    line["out"] = out;
    std::cout << line.dump() << std::endl;
    return 0;
  }

 private:
  // A report that cannot be posted is said on stderr once; the import goes on.
  void Note(const common::Status& st) {
    if (st.ok() || report_failed_) return;
    report_failed_ = true;
    std::cerr << "embody-data: cannot report to the agent: " << st.message() << "\n";
  }

  const char* unit_;
  const char* read_;
  std::unique_ptr<storage::ImportReporter> reporter_;
  bool report_failed_ = false;
  int last_pct_ = -1;
};

int ImportHdf5(const std::string& in, const std::string& out, storage::Hdf5ImportOptions options,
               uint64_t shard_mib, const std::string& nan, bool report) {
  ImportRun run("demos", " read");
  if (common::Status st = run.Start(report); !st.ok()) return Fail(st);
  options.writer.shard_bytes = shard_mib << 20;
  options.nan_policy = nan == "skip" ? storage::NanPolicy::kSkip : storage::NanPolicy::kRefuse;
  options.progress = run.Progress();
  auto result = storage::ImportHdf5(in, out, options);
  return run.Finish(result, out, {{"skipped_nan", result.ok() ? result->skipped_nan : 0}});
}

// An OCI image layout tar: unpacked and checked, its manifest (the image's digest) reported.
int ImportOci(const std::string& archive, const std::string& out, bool report) {
  std::unique_ptr<storage::ImportReporter> reporter;
  if (report) {
    auto r = storage::ImportReporter::FromEnv();
    if (!r.ok()) return Fail(r.status());
    reporter = std::move(*r);
  }
  std::fprintf(stderr, "import: unpacking and checking the OCI image layout %s\n",
               archive.c_str());
  auto image = storage::ImportOciArchive(archive, out);
  if (!image.ok()) {
    if (reporter) (void)reporter->Error(image.status().message());
    return Fail(image.status());
  }
  const nlohmann::json manifest = storage::OciManifestJson(*image);
  if (reporter) {
    common::Status st = reporter->Manifest(manifest);
    if (!st.ok()) return Fail(common::Unavailable("cannot report the manifest: " + st.message()));
  }
  nlohmann::json line = manifest["image"];
  line["out"] = out;
  std::cout << line.dump() << std::endl;
  return 0;
}

int ImportVideo(const std::string& in, const std::string& out,
                storage::VideoEpisodesImportOptions options, uint64_t shard_mib,
                const std::string& resize, bool report, bool tar) {
  options.writer.shard_bytes = shard_mib << 20;
  if (!resize.empty()) {
    unsigned h = 0, w = 0;
    char end = 0;
    if (std::sscanf(resize.c_str(), "%ux%u%c", &h, &w, &end) != 2 || h < 1 || w < 1 || h > 16384 ||
        w > 16384) {
      std::cerr << "embody-data: --resize must be HxW, e.g. 224x224\n";
      return 2;
    }
    options.video.height = static_cast<int>(h);
    options.video.width = static_cast<int>(w);
  }
  ImportRun run("episodes", "");
  if (common::Status st = run.Start(report); !st.ok()) return Fail(st);
  options.progress = run.Progress();
  // A tar of the dataset directory (an upload) is unpacked beside OUT_DIR and removed after.
  auto result = tar ? storage::ImportLerobotArchive(
                          in, out, out + ".unpack-" + std::to_string(::getpid()), options)
                    : storage::ImportLerobot(in, out, options);
  nlohmann::json line = nlohmann::json::object();
  if (result.ok() && result->manifest.source.contains("stats_check")) {
    const nlohmann::json& check = result->manifest.source["stats_check"];
    line["stats_check"] = check;
    if (!check.value("ok", true)) {
      std::cerr << "embody-data: warning: the statistics LeRobot recorded disagree with the "
                   "frames: "
                << (check.contains("error") ? check["error"].dump()
                                            : check.value("mismatches", nlohmann::json()).dump())
                << "\n";
    }
  }
  return run.Finish(result, out, line);
}

int ExportToLerobot(const std::string& in, const std::string& out,
                    storage::LerobotExportOptions options) {
  int last_pct = -1;
  options.progress = [&last_pct](const storage::ImportProgress& p) {
    int pct = static_cast<int>(100 * p.demos_done / std::max<uint64_t>(1, p.demos_total));
    if (pct / 5 == last_pct / 5 && p.demos_done != p.demos_total) return;
    last_pct = pct;
    std::fprintf(stderr, "export: %llu/%llu episodes (%d%%), %llu frames, %.1f MiB\n",
                 static_cast<unsigned long long>(p.demos_done),
                 static_cast<unsigned long long>(p.demos_total), pct,
                 static_cast<unsigned long long>(p.frames), p.bytes / 1048576.0);
  };
  auto r = storage::ExportLerobot(in, out, options);
  if (!r.ok()) return Fail(r.status());
  nlohmann::json line = {{"episodes", r->episodes}, {"frames", r->frames},
                         {"tasks", r->tasks},       {"fps", r->fps},
                         {"features", r->features}, {"ignored_keys", r->ignored_keys},
                         {"video_encoder", r->video_encoder}, {"data_files", r->data_files},
                         {"video_files", r->video_files},     {"seconds", r->seconds},
                         {"out", out}};
  std::cout << line.dump() << std::endl;
  return 0;
}

int Inspect(const std::string& dir) {
  auto ds = storage::Dataset::Open(dir);
  if (!ds.ok()) return Fail(ds.status());
  nlohmann::json j = (*ds)->manifest().ToJson();
  j["samples"] = (*ds)->samples();
  std::cout << j.dump(2) << std::endl;
  return 0;
}

int Verify(const std::string& dir) {
  auto start = std::chrono::steady_clock::now();
  auto ds = storage::Dataset::Open(dir);
  if (!ds.ok()) return Fail(ds.status());
  uint64_t bytes = 0, total = 0, next_report = 0;
  for (const auto& s : (*ds)->manifest().shards) total += s.bytes;
  common::Status st = (*ds)->Verify([&](uint64_t n) {
    bytes += n;
    if (bytes >= next_report) {
      std::fprintf(stderr, "verify: %.1f / %.1f MiB\n", bytes / 1048576.0, total / 1048576.0);
      next_report = bytes + total / 10 + 1;
    }
  });
  if (!st.ok()) return Fail(st);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json line = {{"ok", true},
                         {"shards", (*ds)->manifest().shards.size()},
                         {"episodes", (*ds)->episodes()},
                         {"bytes_checked", bytes},
                         {"seconds", seconds}};
  std::cout << line.dump() << std::endl;
  return 0;
}

// CLI::ExistingPath says "does not exist" for a path it may not look at. An import job runs as
// the job's unprivileged user, so a dataset below a private directory (/root, a 0700 home) is
// the usual case: say which it is, and what to do.
CLI::Validator ReachablePath() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) return "";
        const int err = errno;
        if (err == EACCES) {
          return "cannot reach " + path + ": permission denied for uid " +
                 std::to_string(::getuid()) +
                 " (an import job runs as the job's own unprivileged user: every directory "
                 "above the dataset must let it through and the files be readable to it; or send "
                 "the directory with `embody datasets upload NAME DIR --format lerobot`)";
        }
        return path + ": " + std::strerror(err) + " on this node";
      },
      "PATH");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"embody-data: robot datasets as checksummed shards"};
  app.require_subcommand(1);

  std::string in, out, dir, nan = "refuse";
  uint64_t shard_mib = 256;
  storage::Hdf5ImportOptions options;
  auto* imp = app.add_subcommand("import-hdf5", "import a robomimic/LIBERO HDF5 file");
  // Not checked here: the importer says why a file cannot be read, and --report passes that on.
  imp->add_option("IN", in, "input .hdf5 file")->required();
  imp->add_option("OUT_DIR", out, "output dataset directory (must not exist)")->required();
  imp->add_option("--filter", options.filter, "import only the demos listed in mask/<F>");
  imp->add_option("--shard-mib", shard_mib, "target shard size in MiB")
      ->check(CLI::Range(1, 1 << 20));
  imp->add_option("--language", options.language, "language instruction (overrides the file's)");
  imp->add_option("--patch", options.writer.mapping.patch_size, "image patch size P (tokens)")
      ->check(CLI::Range(1, 4096));
  imp->add_option("--action-horizon", options.writer.mapping.action_horizon,
                  "actions per sample (tokens)")
      ->check(CLI::Range(0, 4096));
  imp->add_option("--history", options.writer.mapping.history_frames,
                  "observation frames per sample")
      ->check(CLI::Range(1, 1024));
  imp->add_option("--max-episode-frames", options.max_episode_frames, "refuse longer episodes")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  imp->add_option("--nan", nan, "NaN/Inf in actions: refuse the file or skip the demo")
      ->check(CLI::IsMember({"skip", "refuse"}));
  bool report = false;
  imp->add_flag("--report", report,
                "post progress, the manifest and errors to the job-local API (EMBODY_AGENT_URL, "
                "EMBODY_JOB_ID, EMBODY_JOB_TOKEN)");

  std::string video_in, video_out, resize;
  bool video_report = false;
  uint64_t video_shard_mib = 256, video_chunk_kib = 1024;
  storage::VideoEpisodesImportOptions video;
  auto* vid = app.add_subcommand(
      "import-lerobot",
      "import a LeRobot dataset (meta/info.json v2.x or v3.0, or episodes.jsonl + "
      "videos/<camera>/*.mp4)");
  vid->alias("import-video");
  // Not checked here beyond existing: the importer says a file is not a directory, and --report
  // passes that on.
  vid->add_option("DIR", video_in, "dataset directory (with --tar: a tar file of one)")
      ->required()
      ->check(ReachablePath());
  vid->add_option("OUT_DIR", video_out, "output dataset directory (must not exist)")->required();
  vid->add_option("--resize", resize, "decode every camera to HxW (e.g. 224x224)");
  vid->add_option("--threads", video.threads, "episodes decoded at once")
      ->check(CLI::Range(1, 256));
  vid->add_option("--shard-mib", video_shard_mib, "target shard size in MiB")
      ->check(CLI::Range(1, 1 << 20));
  vid->add_option("--chunk-kib", video_chunk_kib,
                  "checksummed chunk size in KiB (smaller: cheaper shuffled sample reads)")
      ->check(CLI::Range(1, 1 << 20));
  vid->add_option("--language", video.language, "language instruction (overrides the tasks)");
  vid->add_option("--patch", video.writer.mapping.patch_size, "image patch size P (tokens)")
      ->check(CLI::Range(1, 4096));
  vid->add_option("--action-horizon", video.writer.mapping.action_horizon,
                  "actions per sample (tokens)")
      ->check(CLI::Range(0, 4096));
  vid->add_option("--history", video.writer.mapping.history_frames, "observation frames per sample")
      ->check(CLI::Range(1, 1024));
  vid->add_option("--max-episode-frames", video.max_episode_frames, "refuse longer episodes")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  bool video_tar = false;
  vid->add_flag("--tar", video_tar,
                "DIR is a tar of the dataset directory: unpacked safely beside OUT_DIR, imported, "
                "removed");
  vid->add_flag("--report", video_report,
                "post progress, the manifest and errors to the job-local API (EMBODY_AGENT_URL, "
                "EMBODY_JOB_ID, EMBODY_JOB_TOKEN)");

  std::string oci_in, oci_out;
  bool oci_report = false;
  auto* oci = app.add_subcommand("import-oci", "unpack and check an OCI image layout tar");
  oci->add_option("TAR", oci_in, "the image's OCI layout as a tar (an oci-archive)")->required();
  oci->add_option("OUT_DIR", oci_out, "output layout directory (must not exist)")->required();
  oci->add_flag("--report", oci_report,
                "post the manifest or the error to the job-local API (EMBODY_AGENT_URL, "
                "EMBODY_JOB_ID, EMBODY_JOB_TOKEN)");

  std::string export_in, export_out;
  storage::LerobotExportOptions export_options;
  auto* exp = app.add_subcommand("export-lerobot", "write a dataset as a LeRobot v3.0 directory");
  exp->add_option("DATASET_DIR", export_in, "dataset directory")->required();
  exp->add_option("OUT_DIR", export_out, "output directory (missing or empty)")->required();
  exp->add_option("--fps", export_options.fps, "frames per second (default: the dataset's own)")
      ->check(CLI::Range(0.001, 1000.0));
  exp->add_option("--codec", export_options.codec,
                  "video encoder: av1 (libsvtav1, libaom-av1 or librav1e) or an encoder name");
  exp->add_option("--crf", export_options.crf, "video quality (AV1 CRF, lower is better)")
      ->check(CLI::Range(0, 63));
  exp->add_option("--gop", export_options.gop, "frames between video key frames")
      ->check(CLI::Range(1, 1000));
  exp->add_option("--robot-type", export_options.robot_type, "info.json's robot_type");

  auto* inspect = app.add_subcommand("inspect", "print a dataset's manifest and statistics");
  inspect->add_option("DIR", dir, "dataset directory")->required();
  auto* verify = app.add_subcommand("verify", "check every chunk's checksum");
  verify->add_option("DIR", dir, "dataset directory")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An import job whose input is missing says so to the control plane too.
    // By the flag's count, not its variable: a failed check on DIR (a file, or missing) stops
    // CLI11 before it sets the variables of later options.
    if ((imp->parsed() && imp->count("--report") > 0) ||
        (vid->parsed() && vid->count("--report") > 0) ||
        (oci->parsed() && oci->count("--report") > 0)) {
      if (auto r = storage::ImportReporter::FromEnv(); r.ok()) (void)(*r)->Error(e.what());
    }
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (imp->parsed()) return ImportHdf5(in, out, options, shard_mib, nan, report);
  video.writer.shard.chunk_bytes = video_chunk_kib << 10;
  if (vid->parsed())
    return ImportVideo(video_in, video_out, video, video_shard_mib, resize, video_report,
                       video_tar);
  if (oci->parsed()) return ImportOci(oci_in, oci_out, oci_report);
  if (exp->parsed()) return ExportToLerobot(export_in, export_out, export_options);
  if (inspect->parsed()) return Inspect(dir);
  return Verify(dir);
}
