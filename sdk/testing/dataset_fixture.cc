// embody-sdk-dataset-fixture: datasets for the Python SDK's tests, written and read back by the
// C++ storage library, so embody.data is compared with the reader the engine uses rather than
// with a second idea of the format.
//
//   write-hdf5 FILE DEMOS FRAMES SEED         a robomimic-layout HDF5 file (for embody-data
//                                             import-hdf5), demos of FRAMES, FRAMES+1, ... frames
//   write-dataset DIR EPISODES CHUNK_BYTES SHARD_BYTES SEED
//                                             a dataset written by DatasetWriter directly, with
//                                             small chunks and shards (many of each)
//   dump DIR                                  JSON of what storage::Dataset reads: every episode
//                                             and every sample, bytes as hex
//   partition COUNT SEED EPOCH WORLD RANK SHUFFLE
//                                             JSON list: storage::Partition
//
// Exit status 0, or 1 with the error on stderr.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/partition.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"

namespace {

using nlohmann::json;

int Fail(const std::string& message) {
  std::fprintf(stderr, "embody-sdk-dataset-fixture: %s\n", message.c_str());
  return 1;
}

std::string Hex(const uint8_t* data, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

std::string Hex(const std::vector<uint8_t>& v) { return Hex(v.data(), v.size()); }

int WriteHdf5(const std::string& file, int demos, int frames, uint64_t seed) {
  storage::testing::RobomimicFileSpec spec;
  spec.demos = demos;
  spec.seed = seed;
  for (int d = 0; d < demos; ++d) spec.frames_per_demo.push_back(frames + d);
  auto written = storage::testing::WriteRobomimicFile(file, spec);
  return written.ok() ? 0 : Fail(written.status().ToString());
}

int WriteDataset(const std::string& dir, int episodes, uint64_t chunk_bytes, uint64_t shard_bytes,
                 uint64_t seed) {
  storage::DatasetWriterOptions options;
  options.shard.chunk_bytes = chunk_bytes;
  options.shard_bytes = shard_bytes;
  options.mapping.action_horizon = 4;
  auto writer = storage::DatasetWriter::Create(dir, options);
  if (!writer.ok()) return Fail(writer.status().ToString());
  for (int e = 0; e < episodes; ++e) {
    const std::string name = "demo_" + std::to_string(e);
    auto st = (*writer)->Add(storage::testing::MakeEpisode(seed + e, 3 + (e * 7) % 11, name), name);
    if (!st.ok()) return Fail(st.ToString());
  }
  auto done = (*writer)->Finish(json{{"type", "sdk-test"}});
  return done.ok() ? 0 : Fail(done.status().ToString());
}

int Dump(const std::string& dir) {
  auto opened = storage::Dataset::Open(dir);
  if (!opened.ok()) return Fail(opened.status().ToString());
  const storage::Dataset& ds = **opened;
  json out{{"episodes", json::array()}, {"samples", json::array()}};
  for (uint64_t e = 0; e < ds.episodes(); ++e) {
    auto episode = ds.ReadEpisode(e);
    if (!episode.ok()) return Fail(episode.status().ToString());
    json arrays = json::object();
    for (const storage::Array& a : episode->arrays) arrays[a.spec.name] = Hex(a.data);
    out["episodes"].push_back(
        {{"frames", episode->frames()}, {"attributes", episode->attributes}, {"arrays", arrays}});
  }
  for (uint64_t s = 0; s < ds.samples(); ++s) {
    auto sample = ds.ReadSample(s);
    if (!sample.ok()) return Fail(sample.status().ToString());
    json values = json::object();
    for (const storage::Array& a : sample->values) values[a.spec.name] = Hex(a.data);
    out["samples"].push_back({{"episode", sample->episode},
                              {"frame", sample->frame},
                              {"tokens", sample->tokens},
                              {"values", values},
                              {"action_frames", sample->action_chunk.frames},
                              {"action_chunk", Hex(sample->action_chunk.data)}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}

int PrintPartition(uint64_t count, uint64_t seed, uint64_t epoch, int world, int rank,
                   bool shuffle) {
  auto part = storage::Partition(count, {seed, epoch, world, rank, shuffle});
  if (!part.ok()) return Fail(part.status().ToString());
  std::cout << json(*part).dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  auto u64 = [&](size_t i) { return std::strtoull(a[i].c_str(), nullptr, 10); };
  if (a.size() == 5 && a[0] == "write-hdf5") {
    return WriteHdf5(a[1], static_cast<int>(u64(2)), static_cast<int>(u64(3)), u64(4));
  }
  if (a.size() == 6 && a[0] == "write-dataset") {
    return WriteDataset(a[1], static_cast<int>(u64(2)), u64(3), u64(4), u64(5));
  }
  if (a.size() == 2 && a[0] == "dump") return Dump(a[1]);
  if (a.size() == 7 && a[0] == "partition") {
    return PrintPartition(u64(1), u64(2), u64(3), static_cast<int>(u64(4)),
                          static_cast<int>(u64(5)), a[6] == "1");
  }
  return Fail(
      "usage: write-hdf5 FILE DEMOS FRAMES SEED | write-dataset DIR EPISODES "
      "CHUNK_BYTES SHARD_BYTES SEED | dump DIR | partition COUNT SEED EPOCH WORLD RANK "
      "SHUFFLE");
}
