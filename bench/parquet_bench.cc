// Parquet decode throughput on one core: a large Snappy-compressed float32 column read with
// storage/parquet (docs/parquet.md) against a plain read() of the same file's bytes, side by
// side (docs/benchmarks.md, "Parquet").
//
// Two files are written with the small writer in storage/testing/parquet_writer.h (not Arrow:
// generating 256 MiB through the npm writer takes minutes; the reader's agreement with Arrow's
// writer is the fixture tests' job), each holding --mib MiB of float32 (default 256) that look
// like robot state (per-element sinusoids plus noise, so Snappy finds little to remove, as in
// real joint data; --data held repeats 3 rows in 4, so Snappy has copies to make), in ~1 MiB
// Snappy pages and row groups of 64 MiB of values:
//   flat   one required FLOAT column
//   list   a LeRobot-shaped column: LIST<FLOAT> of 26 per row, with repetition and definition
//          levels per value (optional list, optional element, as Arrow writes a fixed-size list)
// Each round times, warm (the page cache holds the file), read() of the whole file into a
// buffer, then the whole column decoded into one float array (ReadFlatColumn /
// ReadListColumn<float>, every row group); rounds alternate so both see the same machine.
// GB/s are 1e9 bytes of uncompressed float data (or, for read(), of file bytes) per second;
// the figures are medians over --rounds. --file/--column time a file of your own instead (its
// column read as LIST<float> when it has lists, else flat).
//
//   parquet_bench [--mib 256] [--rounds 5] [--dir /tmp] [--codec snappy|zstd|gzip|none]
//                 [--data noisy|held] [--page-v2] [--file F --column C] [--keep]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "storage/parquet/columns.h"
#include "storage/testing/parquet_writer.h"

namespace {

namespace fs = std::filesystem;
namespace pq = storage::parquet;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "parquet_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// Reads the whole file with read() into `buffer` (sized by the caller): the baseline.
double TimeRead(const std::string& path, std::vector<char>* buffer) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("open " + path);
  size_t done = 0;
  while (done < buffer->size()) {
    const ssize_t n =
        ::read(fd, buffer->data() + done, std::min<size_t>(buffer->size() - done, 8 << 20));
    if (n <= 0) Die("read " + path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Seconds(t0);
}

struct Decoded {
  double seconds = 0;
  size_t floats = 0;
  double checksum = 0;  // keeps the values live
};

Decoded TimeDecode(const std::string& path, const std::string& column) {
  const auto t0 = Clock::now();
  auto file = pq::ParquetFile::Open(path);
  if (!file.ok()) Die(file.status().ToString());
  auto found = (*file)->schema().FindColumn(column);
  if (!found.ok()) Die(found.status().ToString());
  Decoded d;
  if ((*file)->schema().columns()[static_cast<size_t>(*found)].max_rep > 0) {
    auto c = pq::ReadListColumn<float>(**file, column);
    if (!c.ok()) Die(c.status().ToString());
    d.seconds = Seconds(t0);
    d.floats = c->values.size();
    d.checksum = c->values.empty() ? 0 : c->values[d.floats / 2] + c->offsets.back();
  } else {
    auto c = pq::ReadFlatColumn<float>(**file, column);
    if (!c.ok()) Die(c.status().ToString());
    d.seconds = Seconds(t0);
    d.floats = c->values.size();
    d.checksum = c->values.empty() ? 0 : c->values[d.floats / 2];
  }
  return d;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string name, path, column;
  uint64_t file_bytes = 0;
  std::vector<double> read_s, decode_s;
  size_t floats = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Parquet float column decode vs read() of the same bytes, one core"};
  int mib = 256, rounds = 5;
  std::string dir = fs::temp_directory_path().string(), codec_name = "snappy", user_file,
              user_column;
  bool keep = false, page_v2 = false;
  std::string data_mode = "noisy";
  app.add_option("--mib", mib, "MiB of float32 data per file");
  app.add_option("--rounds", rounds, "timed rounds (medians are reported)");
  app.add_option("--dir", dir, "where the files are written");
  app.add_option("--codec", codec_name, "snappy, zstd, gzip or none");
  app.add_option("--file", user_file, "time this Parquet file instead");
  app.add_option("--column", user_column, "the float column of --file");
  app.add_flag("--keep", keep, "keep the written files");
  app.add_flag("--page-v2", page_v2, "write data pages v2 (levels outside the compression)");
  app.add_option("--data", data_mode, "noisy (Snappy finds nothing) or held (rows repeat)")
      ->check(CLI::IsMember({"noisy", "held"}));
  CLI11_PARSE(app, argc, argv);

  const int32_t codec = codec_name == "snappy" ? 1
                        : codec_name == "zstd" ? 6
                        : codec_name == "gzip" ? 2
                        : codec_name == "none" ? 0
                                               : -1;
  if (codec < 0) Die("unknown codec " + codec_name);

  std::vector<Case> cases;
  std::vector<std::string> written;
  if (!user_file.empty()) {
    if (user_column.empty()) Die("--file needs --column");
    Case c;
    c.name = "file";
    c.path = user_file;
    c.column = user_column;
    cases.push_back(c);
  } else {
    constexpr int kDim = 26;
    const int64_t floats = static_cast<int64_t>(mib) << 18;  // MiB * 2^20 / 4
    const int64_t list_rows = floats / kDim;
    std::vector<float> values(static_cast<size_t>(floats));
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.0f, 0.01f);
    for (int64_t i = 0; i < floats; ++i) {
      const int64_t row = i / kDim, k = i % kDim;
      // "held": a row repeats the one before it 3 times in 4 (a robot at rest, a sensor slower
      // than the frame rate), which gives Snappy matches to copy.
      if (data_mode == "held" && row > 0 && k == 0 && rng() % 4 != 0) {
        std::copy_n(values.begin() + (i - kDim), std::min<int64_t>(kDim, floats - i),
                    values.begin() + i);
        i += kDim - 1;
        continue;
      }
      values[static_cast<size_t>(i)] =
          std::sin(0.01f * static_cast<float>(row) + 0.7f * static_cast<float>(k)) *
              (1.0f + 0.1f * static_cast<float>(k)) +
          noise(rng);
    }
    const int64_t values_per_group = int64_t{64} << 18;  // 64 MiB of floats
    pq::PhysicalType f32 = pq::PhysicalType::kFloat;
    struct Spec {
      const char* name;
      const char* column;
      int list_length;
      int64_t rows;
    } specs[] = {{"flat", "value", 0, floats}, {"list", "observation.state", kDim, list_rows}};
    for (const Spec& s : specs) {
      storage::testing::SimpleFileOptions o;
      o.codec = codec;
      o.page_v2 = page_v2;
      const int64_t per_row = std::max(s.list_length, 1);
      o.rows_per_page = std::max<int64_t>(1, (int64_t{1} << 18) / per_row);  // ~1 MiB of floats
      o.rows_per_row_group = values_per_group / per_row;
      const auto t0 = Clock::now();
      const std::string bytes = storage::testing::WriteSimpleFile(
          {{s.column, f32, s.list_length, values.data()}}, s.rows, o);
      const std::string path =
          (fs::path(dir) / ("parquet_bench_" + std::string(s.name) + ".parquet")).string();
      std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
      std::printf("wrote %s: %.1f MiB for %.1f MiB of float32 (%s, %.2fx) in %.1f s\n",
                  path.c_str(), bytes.size() / 1048576.0, floats * 4 / 1048576.0,
                  codec_name.c_str(), floats * 4.0 / bytes.size(), Seconds(t0));
      Case c;
      c.name = s.name;
      c.path = path;
      c.column = s.column;
      cases.push_back(c);
      written.push_back(path);
    }
  }

  for (Case& c : cases) {
    c.file_bytes = fs::file_size(c.path);
    std::vector<char> warm(c.file_bytes);
    TimeRead(c.path, &warm);                         // into the page cache
    c.floats = TimeDecode(c.path, c.column).floats;  // and one untimed decode
  }
  double keep_live = 0;
  for (int r = 0; r < rounds; ++r) {
    for (Case& c : cases) {
      std::vector<char> buffer(c.file_bytes);
      c.read_s.push_back(TimeRead(c.path, &buffer));
      keep_live += buffer[buffer.size() / 2];
      const Decoded d = TimeDecode(c.path, c.column);
      c.decode_s.push_back(d.seconds);
      keep_live += d.checksum;
    }
  }

  const std::string cpu = CpuModel();
  std::printf("\nCPU: %s; one thread; page cache warm; medians of %d rounds\n", cpu.c_str(),
              rounds);
  std::printf("%-6s %10s %10s %12s %12s %14s %8s\n", "case", "file MiB", "floats M", "read() GB/s",
              "decode GB/s", "decode/read()", "ms");
  nlohmann::json out = {{"bench", "parquet"}, {"cpu", cpu},        {"codec", codec_name},
                        {"page_v2", page_v2}, {"data", data_mode}, {"rounds", rounds}};
  for (const Case& c : cases) {
    const double read_s = Median(c.read_s), decode_s = Median(c.decode_s);
    const double read_gbps = c.file_bytes / read_s / 1e9;
    const double decode_gbps = c.floats * 4.0 / decode_s / 1e9;
    std::printf("%-6s %10.1f %10.1f %12.2f %12.2f %14.2f %8.1f\n", c.name.c_str(),
                c.file_bytes / 1048576.0, c.floats / 1e6, read_gbps, decode_gbps,
                decode_gbps / read_gbps, decode_s * 1e3);
    out[c.name] = {{"file_bytes", c.file_bytes},
                   {"floats", c.floats},
                   {"read_gbps", read_gbps},
                   {"decode_gbps", decode_gbps},
                   {"decode_over_read", decode_gbps / read_gbps}};
  }
  if (!keep) {
    for (const std::string& p : written) fs::remove(p);
  }
  std::printf("%s\n", out.dump().c_str());
  return keep_live == 12345.678 ? 1 : 0;
}
