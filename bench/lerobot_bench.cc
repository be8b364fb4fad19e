// lerobot_bench: the LeRobot v3.0 import (storage/lerobot_dataset.h) on one decoder thread, in
// frames per second and as a multiple of real time, side by side in one run with FFmpeg's own
// command line decoding the same video files (`ffmpeg -threads 1 -i FILE -f null -`), the floor
// any import that decodes video must pay (docs/benchmarks.md, "LeRobot import").
//
//   lerobot_bench [--episodes 100] [--frames 300] [--size 224] [--dim 14] [--fps 30]
//                 [--cameras 1] [--threads 1] [--dir /tmp] [--keep] [--import-dir DIR]
//
// The dataset is made the way data leaves this project: episodes written with
// storage::DatasetWriter (camera frames are a smooth periodic texture panning across the view with
// a soft disc moving over it, so AV1 compresses them like camera footage rather than noise;
// --dim-wide state and action as smooth curves), then exported with storage::ExportLerobot (our
// parquet writer, AV1 at LeRobot's CRF 30 and GOP 2). The source is deleted once exported. Then,
// warm page cache: ffmpeg decodes every video file (one process per file, one thread), the import
// runs into a fresh directory with VideoEpisodesImportOptions::threads = --threads, and ffmpeg
// runs again; the floor is the mean of its two passes, which bracket the import in time.
//
// Real time = episode frames imported per wall second / fps, and per core = episode frames per
// CPU second of the process (decoder thread, writer, checksums) / fps; the goal (>= 5x) must hold
// for both. The ratio against ffmpeg is over camera frames per wall second. ffmpeg missing is an
// error (exit 2): without the floor the figure means little. Progress goes to stderr; the last
// line of stdout is JSON. --import-dir keeps the import there (for bench/lerobot_bench.sh, which
// trains on it); --keep keeps everything under the run's directory.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/load_average.h"
#include "storage/dataset_writer.h"
#include "storage/lerobot_dataset.h"
#include "storage/lerobot_export.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  int episodes = 100, frames = 300, size = 224, dim = 14, cameras = 1, threads = 1;
  double fps = 30;
  std::string dir = "/tmp", import_dir;
  bool keep = false;
};

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void Die(const std::string& what, int code = 1) {
  std::fprintf(stderr, "lerobot_bench: %s\n", what.c_str());
  std::exit(code);
}

void Check(const common::Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

double CpuSeconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Runs argv with stdout and stderr to `log`; false when it could not start or failed.
// `cpu_seconds` gets the child's user + system time.
bool RunCommand(const std::vector<std::string>& argv, const std::string& log, double* cpu_seconds) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  rusage u{};
  if (::wait4(pid, &status, 0, &u) != pid) return false;
  if (cpu_seconds != nullptr) {
    *cpu_seconds =
        u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A periodic RGB texture of side kTexture, one per camera: sinusoids whose periods divide the
// side (so it wraps without a seam), broad ones for lighting and shapes, finer ones for edges, and
// surface detail (random values on a 4-pixel grid, interpolated). Smooth enough for motion
// compensation, detailed enough that AV1 spends bytes on it as it does on a camera's view.
constexpr int kTexture = 512;
constexpr int kGrain = 4;

std::vector<uint8_t> MakeTexture(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> broad(1, 6), fine(8, 48);
  std::uniform_real_distribution<double> phase(0, 2 * M_PI), amp(10, 30), small(3, 10);
  struct Wave {
    int fx, fy;
    double phase, amp[3];
  };
  std::vector<Wave> waves;
  for (int i = 0; i < 5; ++i) {
    waves.push_back({broad(rng), broad(rng), phase(rng), {amp(rng), amp(rng), amp(rng)}});
  }
  for (int i = 0; i < 6; ++i) {
    waves.push_back({fine(rng), fine(rng), phase(rng), {small(rng), small(rng), small(rng)}});
  }
  constexpr int kCells = kTexture / kGrain;
  std::uniform_real_distribution<double> grain(-20, 20);
  std::vector<double> cells(size_t{kCells} * kCells);
  for (double& c : cells) c = grain(rng);
  auto cell = [&](int cx, int cy) { return cells[(cy % kCells) * kCells + cx % kCells]; };
  std::vector<uint8_t> t(size_t{kTexture} * kTexture * 3);
  for (int y = 0; y < kTexture; ++y) {
    for (int x = 0; x < kTexture; ++x) {
      double v[3] = {128, 118, 108};
      for (const Wave& w : waves) {
        const double s = std::sin(2 * M_PI * (w.fx * x + w.fy * y) / kTexture + w.phase);
        for (int c = 0; c < 3; ++c) v[c] += w.amp[c] * s;
      }
      const int cx = x / kGrain, cy = y / kGrain;
      const double fx = (x % kGrain) / double{kGrain}, fy = (y % kGrain) / double{kGrain};
      const double g = (1 - fy) * ((1 - fx) * cell(cx, cy) + fx * cell(cx + 1, cy)) +
                       fy * ((1 - fx) * cell(cx, cy + 1) + fx * cell(cx + 1, cy + 1));
      for (int c = 0; c < 3; ++c) v[c] += g;
      for (int c = 0; c < 3; ++c) {
        t[(size_t{static_cast<size_t>(y)} * kTexture + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(v[c], 0.0, 255.0));
      }
    }
  }
  return t;
}

// Frame `f` of one camera: the texture seen through a window panning at (vx, vy) pixels a frame,
// a soft-edged disc on a Lissajous path over it (an object moving in the scene), and a little
// sensor noise (±2) that differs from frame to frame.
void RenderFrame(const std::vector<uint8_t>& texture, int size, int f, double ox, double oy,
                 double vx, double vy, uint32_t* noise, uint8_t* out) {
  const int x0 = static_cast<int>(std::lround(ox + vx * f)) & (kTexture - 1);
  const int y0 = static_cast<int>(std::lround(oy + vy * f)) & (kTexture - 1);
  for (int y = 0; y < size; ++y) {
    const uint8_t* row =
        texture.data() + size_t{static_cast<size_t>((y0 + y) & (kTexture - 1))} * kTexture * 3;
    uint8_t* dst = out + size_t{static_cast<size_t>(y)} * size * 3;
    for (int done = 0; done < size;) {
      const int x = (x0 + done) & (kTexture - 1);
      const int n = std::min(size - done, kTexture - x);
      std::memcpy(dst + done * 3, row + x * 3, size_t{static_cast<size_t>(n)} * 3);
      done += n;
    }
  }
  const double cx = size * (0.5 + 0.3 * std::sin(0.031 * f + ox));
  const double cy = size * (0.5 + 0.3 * std::cos(0.023 * f + oy));
  const double r = size * 0.12;
  for (int y = std::max(0, static_cast<int>(cy - r - 2));
       y < std::min(size, static_cast<int>(cy + r + 2)); ++y) {
    for (int x = std::max(0, static_cast<int>(cx - r - 2));
         x < std::min(size, static_cast<int>(cx + r + 2)); ++x) {
      const double d = std::hypot(x - cx, y - cy);
      const double a = std::clamp(r + 1.5 - d, 0.0, 1.0);  // 1 inside, a soft edge
      if (a <= 0) continue;
      uint8_t* p = out + (size_t{static_cast<size_t>(y)} * size + x) * 3;
      const uint8_t colour[3] = {220, 40, 40};
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(p[c] + a * (colour[c] - p[c]));
    }
  }
  uint32_t x = *noise;
  for (size_t i = 0, n = size_t{static_cast<size_t>(size)} * size * 3; i < n; ++i) {
    x ^= x << 13;  // xorshift32: cheap, and the noise need not be good
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<uint8_t>(std::clamp(int{out[i]} + static_cast<int>(x % 5) - 2, 0, 255));
  }
  *noise = x;
}

storage::Array F32Curves(const std::string& key, int dim, int frames, double phase) {
  storage::Array a;
  a.spec = {key, storage::DType::kF32, {dim}};
  a.frames = frames;
  a.data.resize(size_t{static_cast<size_t>(frames)} * dim * sizeof(float));
  auto* v = reinterpret_cast<float*>(a.data.data());
  for (int f = 0; f < frames; ++f) {
    for (int d = 0; d < dim; ++d) {
      v[size_t{static_cast<size_t>(f)} * dim + d] =
          static_cast<float>(0.5 * std::sin(0.05 * f * (1 + 0.1 * d) + phase + d));
    }
  }
  return a;
}

// The episodes, written as a dataset directory at `out`.
void WriteSource(const Args& a, const std::string& out) {
  static const char* kNames[] = {"cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"};
  std::vector<std::vector<uint8_t>> textures;
  for (int c = 0; c < a.cameras; ++c) textures.push_back(MakeTexture(17 + c));
  auto writer = storage::DatasetWriter::Create(out, {});
  Check(writer.status(), "create " + out);
  std::mt19937 rng(1);
  uint32_t noise = 2463534242u;
  std::uniform_real_distribution<double> offset(0, kTexture), speed(-2.0, 2.0);
  static const char* kTasks[] = {"fold the towel", "put the cup on the plate", "open the drawer",
                                 "stack the blocks"};
  const size_t frame_bytes = size_t{static_cast<size_t>(a.size)} * a.size * 3;
  auto t0 = Clock::now();
  for (int e = 0; e < a.episodes; ++e) {
    storage::Episode ep;
    ep.arrays.push_back(F32Curves("actions", a.dim, a.frames, 0.1 * e + 0.3));
    ep.arrays.push_back(F32Curves("obs/state", a.dim, a.frames, 0.1 * e));
    for (int c = 0; c < a.cameras; ++c) {
      storage::Array img;
      img.spec = {std::string("obs/") + kNames[c % 4] + (c < 4 ? "" : std::to_string(c)),
                  storage::DType::kU8,
                  {a.size, a.size, 3}};
      img.frames = a.frames;
      img.data.resize(frame_bytes * a.frames);
      const double ox = offset(rng), oy = offset(rng), vx = speed(rng), vy = speed(rng);
      for (int f = 0; f < a.frames; ++f) {
        RenderFrame(textures[c], a.size, f, ox, oy, vx, vy, &noise,
                    img.data.data() + f * frame_bytes);
      }
      ep.arrays.push_back(std::move(img));
    }
    std::sort(ep.arrays.begin(), ep.arrays.end(),
              [](const auto& x, const auto& y) { return x.spec.name < y.spec.name; });
    ep.attributes.emplace_back(storage::kAttrLanguage, kTasks[e % 4]);
    Check((*writer)->Add(ep, "episode " + std::to_string(e)), "write episode");
    if ((e + 1) % std::max(1, a.episodes / 10) == 0 || e + 1 == a.episodes) {
      std::fprintf(stderr, "lerobot_bench: wrote %d/%d episodes, %.0f MiB, %.1f s\n", e + 1,
                   a.episodes, (*writer)->bytes() / 1048576.0, Seconds(t0));
    }
  }
  Check((*writer)->Finish({{"type", "generated"}, {"fps", a.fps}}).status(), "finish " + out);
}

std::vector<std::string> VideoFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/videos")) {
    if (e.is_regular_file() && e.path().extension() == ".mp4") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

struct Timing {
  double wall = 0, cpu = 0;
  int64_t frames = 0;  // camera frames (ffmpeg: as it counted them)
};

// ffmpeg decoding every file on one thread, to nothing: the floor.
Timing FfmpegDecode(const std::vector<std::string>& files, const std::string& log) {
  Timing t;
  static const std::regex kFrame("frame=\\s*([0-9]+)");
  for (const std::string& f : files) {
    double cpu = 0;
    auto t0 = Clock::now();
    if (!RunCommand(
            {"ffmpeg", "-hide_banner", "-nostdin", "-threads", "1", "-i", f, "-f", "null", "-"},
            log, &cpu)) {
      Die("ffmpeg failed on " + f + ":\n" + ReadText(log));
    }
    t.wall += Seconds(t0);
    t.cpu += cpu;
    const std::string out = ReadText(log);
    int64_t last = -1;
    for (std::sregex_iterator m(out.begin(), out.end(), kFrame), end; m != end; ++m) {
      last = std::stoll((*m)[1]);
    }
    if (last < 0) Die("no frame count in ffmpeg's output for " + f + ":\n" + out);
    t.frames += last;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"LeRobot v3.0 import on one thread vs ffmpeg's decode of the same videos"};
  app.add_option("--episodes", a.episodes)->check(CLI::Range(1, 100000));
  app.add_option("--frames", a.frames, "frames per episode")->check(CLI::Range(2, 100000));
  app.add_option("--size", a.size, "camera height and width (even)")->check(CLI::Range(16, 2048));
  app.add_option("--dim", a.dim, "state and action width")->check(CLI::Range(1, 4096));
  app.add_option("--fps", a.fps)->check(CLI::Range(1.0, 1000.0));
  app.add_option("--cameras", a.cameras)->check(CLI::Range(1, 16));
  app.add_option("--threads", a.threads, "import decoder threads")->check(CLI::Range(1, 256));
  app.add_option("--dir", a.dir, "where the run's files go");
  app.add_option("--import-dir", a.import_dir, "import into DIR (must not exist) and keep it");
  app.add_flag("--keep", a.keep, "keep the run's files");
  CLI11_PARSE(app, argc, argv);
  if (a.size % 2 != 0) Die("--size must be even (yuv420p)");

  const std::string probe_log = a.dir + "/lerobot_bench_ffmpeg_probe.log";
  if (!RunCommand({"ffmpeg", "-hide_banner", "-version"}, probe_log, nullptr)) {
    std::remove(probe_log.c_str());
    Die("ffmpeg (FFmpeg's command line) is not installed or does not run; it is the floor the "
        "import is measured against. Install Debian's ffmpeg package (deploy/setup.sh --test).",
        2);
  }
  std::remove(probe_log.c_str());

  std::string root = a.dir + "/lerobot_benchXXXXXX";
  if (::mkdtemp(root.data()) == nullptr) Die("cannot make a directory under " + a.dir);
  const std::string source = root + "/source", lerobot = root + "/lerobot";
  const std::string imported = a.import_dir.empty() ? root + "/imported" : a.import_dir;
  const std::string log = root + "/ffmpeg.log";
  const double load_start = bench::LoadAverage();

  auto t0 = Clock::now();
  WriteSource(a, source);
  const double write_seconds = Seconds(t0);
  const uint64_t source_bytes = TreeBytes(source);

  storage::LerobotExportOptions eo;
  eo.fps = a.fps;
  eo.progress = [&, t = Clock::now(), next = 0.0](const storage::ImportProgress& p) mutable {
    if (Seconds(t) >= next || p.demos_done == p.demos_total) {
      std::fprintf(stderr, "lerobot_bench: exported %llu/%llu episodes, %.1f s\n",
                   static_cast<unsigned long long>(p.demos_done),
                   static_cast<unsigned long long>(p.demos_total), Seconds(t));
      next = Seconds(t) + 5;
    }
  };
  auto exported = storage::ExportLerobot(source, lerobot, eo);
  Check(exported.status(), "export");
  fs::remove_all(source);  // GBs of frames; the LeRobot copy is all that is read from here on
  const std::vector<std::string> videos = VideoFiles(lerobot);
  uint64_t video_bytes = 0;
  for (const std::string& v : videos) video_bytes += fs::file_size(v);
  const uint64_t lerobot_bytes = TreeBytes(lerobot);
  std::fprintf(stderr,
               "lerobot_bench: LeRobot v3.0 in %s: %zu video files (%s), %.1f MiB of video, "
               "%.1f MiB in all (export %.1f s)\n",
               lerobot.c_str(), videos.size(), exported->video_encoder.c_str(),
               video_bytes / 1048576.0, lerobot_bytes / 1048576.0, exported->seconds);

  std::fprintf(stderr, "lerobot_bench: ffmpeg decode, pass 1\n");
  const Timing ff1 = FfmpegDecode(videos, log);

  std::fprintf(stderr, "lerobot_bench: import on %d decoder thread(s) into %s\n", a.threads,
               imported.c_str());
  storage::VideoEpisodesImportOptions io;
  io.threads = a.threads;
  io.progress = [&, t = Clock::now(), next = 0.0](const storage::ImportProgress& p) mutable {
    if (Seconds(t) >= next || p.demos_done == p.demos_total) {
      std::fprintf(stderr, "lerobot_bench: imported %llu/%llu episodes, %llu frames, %.1f s\n",
                   static_cast<unsigned long long>(p.demos_done),
                   static_cast<unsigned long long>(p.demos_total),
                   static_cast<unsigned long long>(p.frames), Seconds(t));
      next = Seconds(t) + 5;
    }
  };
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  t0 = Clock::now();
  auto result = storage::ImportLerobot(lerobot, imported, io);
  Timing ours{Seconds(t0), CpuSeconds(RUSAGE_SELF) - cpu0, 0};
  Check(result.status(), "import");
  ours.frames = static_cast<int64_t>(result->frames) * a.cameras;
  const uint64_t imported_bytes = result->bytes;
  if (a.import_dir.empty() && !a.keep) fs::remove_all(imported);

  std::fprintf(stderr, "lerobot_bench: ffmpeg decode, pass 2\n");
  const Timing ff2 = FfmpegDecode(videos, log);
  const double load_end = bench::LoadAverage();
  if (!a.keep) {
    fs::remove_all(lerobot);
    std::remove(log.c_str());
    if (fs::is_empty(root)) fs::remove(root);
  }

  const int64_t steps = static_cast<int64_t>(result->frames);  // episode frames (time steps)
  const int64_t camera_frames = steps * a.cameras;
  if (ff1.frames != camera_frames || ff2.frames != camera_frames) {
    Die("ffmpeg decoded " + std::to_string(ff1.frames) + " and " + std::to_string(ff2.frames) +
        " frames, the dataset has " + std::to_string(camera_frames));
  }
  const double ff_wall = (ff1.wall + ff2.wall) / 2, ff_cpu = (ff1.cpu + ff2.cpu) / 2;
  const double ff_fps = camera_frames / ff_wall;
  const double our_fps = camera_frames / ours.wall;
  const double realtime = steps / ours.wall / a.fps;
  const double realtime_cpu = steps / ours.cpu / a.fps;
  const double ratio = our_fps / ff_fps;
  const bool goal = realtime >= 5 && realtime_cpu >= 5;

  std::printf("lerobot_bench: %s; load average %.2f at the start, %.2f at the end\n",
              bench::CpuModel().c_str(), load_start, load_end);
  std::printf(
      "dataset: %d episodes x %d frames, %d camera(s) %dx%d AV1 (%s, crf 30, gop 2) at %.0f fps, "
      "%d-dim state/action; %.1f MiB of video, %.1f MiB LeRobot v3.0 (from %.1f MiB of frames "
      "written in %.1f s, exported in %.1f s)\n",
      a.episodes, a.frames, a.cameras, a.size, a.size, exported->video_encoder.c_str(), a.fps,
      a.dim, video_bytes / 1048576.0, lerobot_bytes / 1048576.0, source_bytes / 1048576.0,
      write_seconds, exported->seconds);
  std::printf("%-38s %9s %9s %12s %12s\n", "", "wall s", "CPU s", "frames/s", "per CPU s");
  auto row = [&](const char* name, const Timing& t) {
    std::printf("%-38s %9.2f %9.2f %12.0f %12.0f\n", name, t.wall, t.cpu, camera_frames / t.wall,
                camera_frames / t.cpu);
  };
  row("ffmpeg -threads 1 -f null, pass 1", ff1);
  row("ffmpeg -threads 1 -f null, pass 2", ff2);
  char name[64];
  std::snprintf(name, sizeof(name), "ImportLerobot, %d decoder thread(s)", a.threads);
  row(name, ours);
  std::printf(
      "import: %.1f MB of shards; %.1fx real time (wall), %.1fx per CPU second (goal >= 5x: %s)\n",
      imported_bytes / 1e6, realtime, realtime_cpu, goal ? "met" : "NOT met");
  std::printf("import / ffmpeg decode (frames per wall second): %.3f; per CPU second: %.3f\n",
              ratio, (camera_frames / ours.cpu) / (camera_frames / ff_cpu));

  nlohmann::json j = {{"bench", "lerobot_import"},
                      {"cpu", bench::CpuModel()},
                      {"episodes", a.episodes},
                      {"frames_per_episode", a.frames},
                      {"cameras", a.cameras},
                      {"size", a.size},
                      {"dim", a.dim},
                      {"fps", a.fps},
                      {"threads", a.threads},
                      {"video_encoder", exported->video_encoder},
                      {"video_bytes", video_bytes},
                      {"lerobot_bytes", lerobot_bytes},
                      {"imported_bytes", imported_bytes},
                      {"camera_frames", camera_frames},
                      {"import_seconds", ours.wall},
                      {"import_cpu_seconds", ours.cpu},
                      {"import_frames_per_s", our_fps},
                      {"ffmpeg_seconds", {ff1.wall, ff2.wall}},
                      {"ffmpeg_cpu_seconds", {ff1.cpu, ff2.cpu}},
                      {"ffmpeg_frames_per_s", ff_fps},
                      {"import_over_ffmpeg", ratio},
                      {"import_over_ffmpeg_cpu", ff_cpu / ours.cpu},
                      {"realtime", realtime},
                      {"realtime_per_cpu_second", realtime_cpu},
                      {"goal_met", goal},
                      {"loadavg", {load_start, load_end}}};
  if (!a.import_dir.empty()) j["import_dir"] = a.import_dir;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
