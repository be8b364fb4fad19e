// Storage benchmark: HDF5 import throughput, and reading the same samples from shards vs from
// one file per episode (docs/benchmarks.md, "Storage").
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
//   storage_bench [--demos N] [--frames T] [--image S] [--readers R] [--dir D] [--keep]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/hdf5_importer.h"
#include "storage/partition.h"
#include "storage/shard_reader.h"
#include "storage/testing/robomimic_file.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"storage_bench: HDF5 import MB/s; shards vs one file per episode"};
  int demos = 200, frames = 150, image = 84, readers = 2;
  std::string dir = "/tmp/embody_storage_bench";
  bool keep = false;
  app.add_option("--demos", demos)->check(CLI::Range(2, 100000));
  app.add_option("--frames", frames)->check(CLI::Range(1, 100000));
  app.add_option("--image", image)->check(CLI::Range(8, 1024));
  app.add_option("--readers", readers)->check(CLI::Range(1, 64));
  app.add_option("--dir", dir, "work directory (removed at the end unless --keep)");
  app.add_flag("--keep", keep);
  CLI11_PARSE(app, argc, argv);

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
  std::printf("%s\n", line.dump().c_str());
  if (!keep) fs::remove_all(dir);
  return 0;
}
