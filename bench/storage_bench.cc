// Storage benchmark: HDF5 and mp4 import throughput, reading the same samples from shards vs
// from one file per episode, and the video decoding a training step avoids by reading frames
// decoded at import (docs/benchmarks.md, "Storage").
//
// A robomimic-layout HDF5 file is generated (default 200 demos × 150 frames, two 84×84×3
// cameras, two low-dim obs keys, 7-D actions) and imported into 256 MiB shards (import MB/s).
// The same episodes are then also written one file per episode, in the same format with one
// frame per chunk (so reading one frame reads exactly that frame: the layout's best case). Every
// sample is then read with R reader ranks (threads, each with its own reader as separate
// processes would have), each rank taking its part of the episodes (Partition, seed 0) and
// every sample of them, in three ways:
//   shards       Dataset over the shards (files opened once per rank)
//   per-episode  Dataset over the per-episode files (all opened once per rank, kept open)
//   per-episode, opened per sample: each sample opens its episode's file, checks footer and
//                index, reads its rows and closes it (a map-style loader without handle cache)
// each cold (the files dropped from the page cache with posix_fadvise DONTNEED first) and warm.
//
// Video: the same number of episodes, frames and cameras at the same resolution are written as
// LeRobot-style episodes (episodes.jsonl + one mp4 per camera per episode, H.264 where libx264
// is linked, else MPEG-4 Part 2; key frame every --gop frames) and imported into shards
// (ImportVideoEpisodes: frames decoded at import; import MB/s as for HDF5). Then a shuffled
// part of the samples per rank is read two ways, warm: decoding each sample's camera frames
// from the mp4s at read time (seek to the key frame, decode forward, convert to RGB: a decoder
// opened per sample as LeRobot's loader does, and decoders kept open per file), vs reading the
// whole sample (every key, checksums verified) from the video import's shards.
//
//   storage_bench [--demos N] [--frames T] [--image S] [--readers R] [--dir D] [--keep]
//                 [--video-codec C] [--gop G] [--decode-samples N]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/hdf5_importer.h"
#include "storage/lerobot_importer.h"
#include "storage/partition.h"
#include "storage/shard_reader.h"
#include "storage/testing/robomimic_file.h"
#include "storage/testing/video_file.h"
#include "storage/video_import.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void Check(const common::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "storage_bench: %s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

// Drops a directory's files from the page cache (they are clean: written and fsynced).
void DropCache(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// The same for every file under `dir`, recursively.
void DropCacheTree(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

struct ReadResult {
  double seconds = 0;
  uint64_t samples = 0, bytes = 0, files_opened = 0;
  double SamplesPerSecond() const { return samples / seconds; }
};

// R ranks, each opening the dataset itself and reading every sample of its episodes.
ReadResult ReadWithDataset(const std::string& dir, int ranks) {
  std::atomic<uint64_t> samples{0}, bytes{0}, opened{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto ds = storage::Dataset::Open(dir);
      Check(ds.status(), "open dataset");
      opened += (*ds)->files_opened();
      auto part = storage::Partition((*ds)->episodes(), {.seed = 0, .world = ranks, .rank = r});
      for (uint64_t e : *part) {
        uint64_t first = (*ds)->EpisodeFirstSample(e);
        for (uint32_t t = 0; t < (*ds)->EpisodeFrames(e); ++t) {
          auto s = (*ds)->ReadSample(first + t);
          Check(s.status(), "read sample");
          for (const auto& a : s->values) bytes += a.data.size();
          bytes += s->action_chunk.data.size();
          ++samples;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return {Seconds(t0), samples, bytes, opened};
}

// The per-episode files read by a loader that opens the episode's file for every sample.
ReadResult ReadOpeningPerSample(const std::string& dir, int ranks, int horizon) {
  auto m = storage::ReadManifest(dir);
  Check(m.status(), "manifest");
  std::atomic<uint64_t> samples{0}, bytes{0}, opened{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto part = storage::Partition(m->shards.size(), {.seed = 0, .world = ranks, .rank = r});
      for (uint64_t e : *part) {
        const std::string path = dir + "/" + m->shards[e].file;
        for (uint64_t t = 0; t < m->shards[e].frames; ++t) {
          auto shard = storage::ShardReader::Open(path);
          Check(shard.status(), "open episode file");
          ++opened;
          const auto& schema = (*shard)->schema();
          uint32_t frames = (*shard)->index().episodes[0].frames;
          for (size_t k = 0; k < schema.size(); ++k) {
            // One frame per chunk; the action key also reads the chunk that follows.
            uint64_t end =
                schema[k].name == "actions" ? std::min<uint64_t>(frames, t + horizon) : t + 1;
            for (uint64_t c = t; c < end; ++c) {
              auto chunk = (*shard)->ReadChunk(0, k, c);
              Check(chunk.status(), "read chunk");
              bytes += chunk->size();
            }
          }
          ++samples;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return {Seconds(t0), samples, bytes, opened};
}

// Copies a dataset into shards of the default size with `chunk_bytes` chunks.
void Rechunk(const std::string& from, const std::string& to, uint64_t chunk_bytes) {
  auto ds = storage::Dataset::Open(from);
  Check(ds.status(), "open for rechunking");
  storage::DatasetWriterOptions o;
  o.shard.chunk_bytes = chunk_bytes;
  o.mapping = (*ds)->manifest().mapping;
  auto w = storage::DatasetWriter::Create(to, o);
  Check(w.status(), "rechunk writer");
  for (uint64_t e = 0; e < (*ds)->episodes(); ++e) {
    auto ep = (*ds)->ReadEpisode(e);
    Check(ep.status(), "read episode");
    Check((*w)->Add(*ep, "episode " + std::to_string(e)), "write episode");
  }
  Check((*w)->Finish((*ds)->manifest().source).status(), "finish rechunked");
}

// This rank's first `per_rank` samples of its shuffled part (seed 0, epoch 0).
std::vector<uint64_t> SampleSlice(uint64_t samples, int ranks, int rank, uint64_t per_rank) {
  auto part = storage::Partition(samples, {.seed = 0, .world = ranks, .rank = rank});
  Check(part.status(), "partition");
  if (part->size() > per_rank) part->resize(per_rank);
  return *part;
}

// R ranks reading whole samples (every key, verified) of a shuffled slice from shards.
ReadResult ReadSlicesFromShards(const std::string& dir, int ranks, uint64_t per_rank) {
  std::atomic<uint64_t> samples{0}, bytes{0}, opened{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto ds = storage::Dataset::Open(dir);
      Check(ds.status(), "open dataset");
      opened += (*ds)->files_opened();
      for (uint64_t s : SampleSlice((*ds)->samples(), ranks, r, per_rank)) {
        auto sample = (*ds)->ReadSample(s);
        Check(sample.status(), "read sample");
        for (const auto& a : sample->values) bytes += a.data.size();
        ++samples;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {Seconds(t0), samples, bytes, opened};
}

// R ranks decoding the camera frames of the same slices from the episodes' mp4s at read time.
// Only the frames are decoded (the low-dim keys are not read at all), so this is the least a
// video-backed loader pays per sample. keep_open: one decoder per file, opened on first use
// and kept; otherwise opened per sample.
ReadResult DecodeSlicesFromVideo(const std::string& video_dir, const storage::Dataset& ds,
                                 const std::vector<std::string>& cameras, int ranks,
                                 uint64_t per_rank, bool keep_open) {
  std::atomic<uint64_t> samples{0}, bytes{0}, opened{0};
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::map<std::string, std::unique_ptr<storage::VideoFrameReader>> open;
      std::vector<uint8_t> frame;
      for (uint64_t s : SampleSlice(ds.samples(), ranks, r, per_rank)) {
        auto [episode, t] = ds.Locate(s);
        char name[32];
        std::snprintf(name, sizeof(name), "episode_%06llu.mp4",
                      static_cast<unsigned long long>(episode));
        for (const std::string& cam : cameras) {
          const std::string path = video_dir + "/videos/" + cam + "/" + name;
          std::unique_ptr<storage::VideoFrameReader> fresh;
          storage::VideoFrameReader* reader = nullptr;
          if (keep_open && open.count(path)) {
            reader = open[path].get();
          } else {
            auto v = storage::VideoFrameReader::Open(path);
            Check(v.status(), "open video");
            ++opened;
            fresh = std::move(*v);
            reader = fresh.get();
            if (keep_open) open[path] = std::move(fresh);
          }
          frame.resize(static_cast<size_t>(reader->height()) * reader->width() * 3);
          Check(reader->ReadFrame(t, frame.data()), "decode frame");
          bytes += frame.size();
        }
        ++samples;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {Seconds(t0), samples, bytes, opened};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "storage_bench: HDF5 and mp4 import MB/s; shards vs one file per episode; decoding video "
      "at read time vs frames decoded at import"};
  int demos = 200, frames = 150, image = 84, readers = 2;
  std::string dir = "/tmp/embody_storage_bench";
  std::string video_codec = storage::testing::HasVideoEncoder("libx264") ? "libx264" : "mpeg4";
  int gop = 2;
  uint64_t decode_samples = 2000;
  uint64_t small_chunk_kib = 64;
  bool keep = false;
  app.add_option("--demos", demos)->check(CLI::Range(2, 100000));
  app.add_option("--frames", frames)->check(CLI::Range(1, 100000));
  app.add_option("--image", image)->check(CLI::Range(8, 1024));
  app.add_option("--readers", readers)->check(CLI::Range(1, 64));
  app.add_option("--dir", dir, "work directory (removed at the end unless --keep)");
  app.add_option("--video-codec", video_codec, "encoder for the mp4 episodes");
  app.add_option("--gop", gop, "frames from one key frame to the next (LeRobot encodes with 2)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--decode-samples", decode_samples, "samples per rank for the decode comparison")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--small-chunk-kib", small_chunk_kib,
                 "chunk size of the second copy of the video shards, for shuffled reads")
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--keep", keep);
  CLI11_PARSE(app, argc, argv);
  storage::testing::QuietVideoLogs();

  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string h5 = dir + "/in.hdf5", shards = dir + "/shards", episodes = dir + "/episodes";

  storage::testing::RobomimicFileSpec spec;
  spec.demos = demos;
  spec.frames = frames;
  spec.image_size = image;
  auto t0 = Clock::now();
  Check(storage::testing::WriteRobomimicFile(h5, spec).status(), "write hdf5");
  double gen_s = Seconds(t0);
  uint64_t h5_bytes = fs::file_size(h5);
  std::fprintf(stderr, "generated %s: %.1f MiB in %.1f s\n", h5.c_str(), h5_bytes / 1048576.0,
               gen_s);

  storage::Hdf5ImportOptions io;
  DropCache(dir);
  auto imported = storage::ImportHdf5(h5, shards, io);
  Check(imported.status(), "import");
  double import_mbs = imported->bytes / 1e6 / imported->seconds;
  std::fprintf(stderr,
               "import: %llu episodes, %llu frames, %.1f MB in %.2f s = %.1f MB/s (%zu shards)\n",
               static_cast<unsigned long long>(imported->episodes),
               static_cast<unsigned long long>(imported->frames), imported->bytes / 1e6,
               imported->seconds, import_mbs, imported->manifest.shards.size());

  // The same episodes, one file each, one frame per chunk.
  {
    auto ds = storage::Dataset::Open(shards);
    Check(ds.status(), "open shards");
    storage::DatasetWriterOptions o;
    o.shard_bytes = 1;
    o.shard.chunk_bytes = 1;
    o.mapping = (*ds)->manifest().mapping;
    auto w = storage::DatasetWriter::Create(episodes, o);
    Check(w.status(), "per-episode writer");
    for (uint64_t e = 0; e < (*ds)->episodes(); ++e) {
      auto ep = (*ds)->ReadEpisode(e);
      Check(ep.status(), "read episode");
      Check((*w)->Add(*ep, "episode " + std::to_string(e)), "write episode");
    }
    Check((*w)->Finish((*ds)->manifest().source).status(), "finish per-episode");
  }
  const int horizon = io.writer.mapping.action_horizon;

  struct Mode {
    const char* name;
    ReadResult cold, warm;
  };
  std::vector<Mode> modes = {
      {"shards", {}, {}}, {"per_episode", {}, {}}, {"per_episode_open_per_sample", {}, {}}};
  auto run = [&](int m) {
    if (m == 0) return ReadWithDataset(shards, readers);
    if (m == 1) return ReadWithDataset(episodes, readers);
    return ReadOpeningPerSample(episodes, readers, horizon);
  };
  for (int m = 0; m < 3; ++m) {
    DropCache(m == 0 ? shards : episodes);
    modes[m].cold = run(m);
    modes[m].warm = run(m);
  }

  // The same episodes as video: mp4 cameras, low-dim data in episodes.jsonl.
  const std::string video_in = dir + "/video_episodes", video_shards = dir + "/video_shards";
  storage::testing::VideoEpisodesSpec vspec;
  vspec.lengths.assign(demos, frames);
  vspec.cameras = {"agentview_image", "robot0_eye_in_hand_image"};
  vspec.height = vspec.width = image;
  vspec.state_dim = 5;  // robot0_eef_pos (3) + robot0_gripper_qpos (2), as in the HDF5 file
  vspec.video.codec = video_codec;
  vspec.video.gop = gop;
  t0 = Clock::now();
  Check(storage::testing::WriteVideoEpisodes(video_in, vspec).status(), "write video episodes");
  const double encode_s = Seconds(t0);
  const uint64_t video_in_bytes = TreeBytes(video_in);
  std::fprintf(stderr, "encoded %d episodes × 2 cameras (%s, gop %d): %.1f MiB in %.1f s\n", demos,
               video_codec.c_str(), gop, video_in_bytes / 1048576.0, encode_s);
  DropCacheTree(video_in);
  storage::VideoEpisodesImportOptions vo;  // 2 decoding threads, 256 MiB shards
  auto vimported = storage::ImportVideoEpisodes(video_in, video_shards, vo);
  Check(vimported.status(), "video import");
  const double video_import_mbs = vimported->bytes / 1e6 / vimported->seconds;
  std::fprintf(stderr, "video import: %llu episodes, %.1f MB in %.2f s = %.1f MB/s\n",
               static_cast<unsigned long long>(vimported->episodes), vimported->bytes / 1e6,
               vimported->seconds, video_import_mbs);

  // A shuffled sample touches one chunk per key: with 1 MiB chunks that is ~50 frames read and
  // checksummed for one. The same shards with small chunks show what the layout costs.
  const std::string video_small = dir + "/video_shards_small_chunks";
  Rechunk(video_shards, video_small, small_chunk_kib << 10);
  auto vds = storage::Dataset::Open(video_shards);
  Check(vds.status(), "open video shards");
  // Warm for all: what is compared is decoding, not the disk.
  ReadSlicesFromShards(video_shards, readers, decode_samples);
  ReadSlicesFromShards(video_small, readers, decode_samples);
  DecodeSlicesFromVideo(video_in, **vds, vspec.cameras, readers, decode_samples, false);
  const ReadResult from_shards = ReadSlicesFromShards(video_shards, readers, decode_samples);
  const ReadResult from_small = ReadSlicesFromShards(video_small, readers, decode_samples);
  const ReadResult decode_per_sample =
      DecodeSlicesFromVideo(video_in, **vds, vspec.cameras, readers, decode_samples, false);
  const ReadResult decode_kept_open =
      DecodeSlicesFromVideo(video_in, **vds, vspec.cameras, readers, decode_samples, true);

  std::printf("\nHDF5 import: %.1f MB of episode data (%.1f MiB file) in %.2f s: %.1f MB/s\n",
              imported->bytes / 1e6, h5_bytes / 1048576.0, imported->seconds, import_mbs);
  std::printf("\nreading all %llu samples with %d reader ranks\n",
              static_cast<unsigned long long>(modes[0].cold.samples), readers);
  std::printf("%-30s %14s %14s %14s %12s %12s\n", "layout", "files opened", "cold samples/s",
              "warm samples/s", "cold ratio", "warm ratio");
  nlohmann::json line = {{"bench", "storage"},
                         {"demos", demos},
                         {"frames_per_demo", frames},
                         {"image", image},
                         {"readers", readers},
                         {"import_mb_per_s", import_mbs},
                         {"import_seconds", imported->seconds},
                         {"dataset_bytes", imported->bytes},
                         {"hdf5_bytes", h5_bytes},
                         {"shards", imported->manifest.shards.size()}};
  for (const Mode& m : modes) {
    double cold_ratio = modes[0].cold.SamplesPerSecond() / m.cold.SamplesPerSecond();
    double warm_ratio = modes[0].warm.SamplesPerSecond() / m.warm.SamplesPerSecond();
    std::printf("%-30s %14llu %14.0f %14.0f %11.2fx %11.2fx\n", m.name,
                static_cast<unsigned long long>(m.cold.files_opened), m.cold.SamplesPerSecond(),
                m.warm.SamplesPerSecond(), cold_ratio, warm_ratio);
    line[std::string(m.name) + "_files_opened"] = m.cold.files_opened;
    line[std::string(m.name) + "_cold_samples_per_s"] = m.cold.SamplesPerSecond();
    line[std::string(m.name) + "_warm_samples_per_s"] = m.warm.SamplesPerSecond();
    line[std::string("shards_over_") + m.name + "_cold"] = cold_ratio;
    line[std::string("shards_over_") + m.name + "_warm"] = warm_ratio;
  }
  std::printf("(ratio = shards' samples/s over the layout's)\n");

  std::printf(
      "\nvideo import (%s, gop %d, %.1f MiB of mp4 + jsonl): %.1f MB of episode data in "
      "%.2f s: %.1f MB/s (HDF5 above: %.1f MB/s; HDF5 over video %.2fx)\n",
      video_codec.c_str(), gop, video_in_bytes / 1048576.0, vimported->bytes / 1e6,
      vimported->seconds, video_import_mbs, import_mbs, import_mbs / video_import_mbs);
  std::printf("\nshuffled samples, %llu per rank, %d reader ranks, warm\n",
              static_cast<unsigned long long>(decode_samples), readers);
  std::printf("%-52s %12s %10s %14s %14s\n", "source of a sample's camera frames", "files opened",
              "samples/s", "1 MiB shards'", "small shards'");
  char small_name[64];
  std::snprintf(small_name, sizeof(small_name), "shards, %llu KiB chunks (same, all keys)",
                static_cast<unsigned long long>(small_chunk_kib));
  struct Row {
    const char* name;
    const ReadResult& r;
  };
  for (const Row& row :
       {Row{"shards, 1 MiB chunks (decoded at import, all keys)", from_shards},
        Row{small_name, from_small}, Row{"mp4 at read time, decoder per sample", decode_per_sample},
        Row{"mp4 at read time, decoders kept open", decode_kept_open}}) {
    std::printf("%-52s %12llu %10.0f %13.2fx %13.2fx\n", row.name,
                static_cast<unsigned long long>(row.r.files_opened), row.r.SamplesPerSecond(),
                from_shards.SamplesPerSecond() / row.r.SamplesPerSecond(),
                from_small.SamplesPerSecond() / row.r.SamplesPerSecond());
  }
  std::printf("(ratio = that copy of the shards' samples/s over the row's)\n");
  line["video_codec"] = video_codec;
  line["video_gop"] = gop;
  line["video_input_bytes"] = video_in_bytes;
  line["video_import_mb_per_s"] = video_import_mbs;
  line["video_import_seconds"] = vimported->seconds;
  line["video_dataset_bytes"] = vimported->bytes;
  line["hdf5_over_video_import"] = import_mbs / video_import_mbs;
  line["decode_samples_per_rank"] = decode_samples;
  line["video_shards_samples_per_s"] = from_shards.SamplesPerSecond();
  line["small_chunk_kib"] = small_chunk_kib;
  line["video_small_chunk_shards_samples_per_s"] = from_small.SamplesPerSecond();
  line["small_chunks_over_decode_per_sample"] =
      from_small.SamplesPerSecond() / decode_per_sample.SamplesPerSecond();
  line["small_chunks_over_decode_kept_open"] =
      from_small.SamplesPerSecond() / decode_kept_open.SamplesPerSecond();
  line["video_decode_per_sample_samples_per_s"] = decode_per_sample.SamplesPerSecond();
  line["video_decode_kept_open_samples_per_s"] = decode_kept_open.SamplesPerSecond();
  line["shards_over_decode_per_sample"] =
      from_shards.SamplesPerSecond() / decode_per_sample.SamplesPerSecond();
  line["shards_over_decode_kept_open"] =
      from_shards.SamplesPerSecond() / decode_kept_open.SamplesPerSecond();
  std::printf("%s\n", line.dump().c_str());
  if (!keep) fs::remove_all(dir);
  return 0;
}
