// Checkpoint store throughput: the server's blob store over HTTP against a local directory copy,
// side by side in one run.
//
//   checkpoint_bench [--mib 256] [--rounds 3] [--chunk-mib 4]
//
// One private PostgreSQL cluster (tests/support/pg_harness.h) and one embody-server in this
// process on loopback, with one registered node holding one scheduled job: the node's credential
// uploads as an agent does. A file of --mib MiB (incompressible bytes) is written to a temp
// directory, then, in rounds alternating A/B so a drift of the machine's load hits both alike:
//   local: DirCheckpointStore::Put (copy, SHA-256, fsync, rename) and Get (copy, verify, fsync)
//          into another directory of the same file system;
//   blob:  HttpCheckpointStore::Put (SHA-256 pass, chunks of --chunk-mib with their own SHA-256,
//          server-side fdatasync per chunk, commit with the server's SHA-256 pass) and Get
//          (download, verify, fsync).
// Printed: MB/s (10^6 bytes per second) of upload and download for each, the ratios blob/local,
// and one JSON line. The server's log lines go to a file in the temp directory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/file_util.h"
#include "controlplane/server.h"
#include "storage/checkpoint_dir_store.h"
#include "storage/checkpoint_http_store.h"
#include "tests/support/pg_harness.h"

namespace {

using nlohmann::json;

int Fail(const std::string& what) {
  std::fprintf(stderr, "checkpoint_bench: %s\n", what.c_str());
  return 1;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int mib = 256, rounds = 3, chunk_mib = 4;
  CLI::App app{"checkpoint store throughput: blob store over HTTP vs local directory"};
  app.add_option("--mib", mib, "checkpoint size in MiB")->check(CLI::Range(1, 16384));
  app.add_option("--rounds", rounds, "rounds of each")->check(CLI::Range(1, 50));
  app.add_option("--chunk-mib", chunk_mib, "upload chunk size")->check(CLI::Range(1, 8));
  CLI11_PARSE(app, argc, argv);

  std::string tmpl = "/tmp/embody-ckpt-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const std::string log_path = dir + "/server.log";
  const int saved_stderr = dup(STDERR_FILENO);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(log_fd, STDERR_FILENO);

  embody::testing::PgCluster pg;
  if (auto st = pg.Start(); !st.ok()) return Fail(st.ToString());
  auto db = pg.CreateDatabase("bench_ckpt");
  if (!db.ok()) return Fail(db.status().ToString());
  controlplane::ServerOptions so;
  so.db = *db;
  so.data_dir = dir + "/server";
  so.scheduler_period_ms = 50;
  auto server = controlplane::Server::Start(so);
  if (!server.ok()) return Fail(server.status().ToString());
  const int port = (*server)->port();
  httplib::Client cli("127.0.0.1", port);
  auto reg = cli.Post("/v1/agents/register",
                      {{"Authorization", "Bearer " + (*server)->bootstrap().agent_token}},
                      json{{"name", "worker"}, {"address", "127.0.0.1"}, {"cpu_slots", 1}}.dump(),
                      "application/json");
  if (!reg || reg->status != 200) return Fail("register failed");
  const std::string node_token = json::parse(reg->body).value("node_token", "");
  const httplib::Headers admin = {
      {"Authorization", "Bearer " + (*server)->bootstrap().admin_token}};
  auto sub = cli.Post("/v1/jobs", admin,
                      json{{"name", "bench"},
                           {"kind", "train"},
                           {"resources", {{"nodes", 1}}},
                           {"engine", {{"checkpoint", {{"keep", 1}}}}}}
                          .dump(),
                      "application/json");
  if (!sub || sub->status != 201) return Fail("submit failed");
  const int64_t job = json::parse(sub->body).value("id", int64_t{0});
  for (int i = 0; i < 200; ++i) {  // placed on the node: its credential may upload
    auto j = cli.Get("/v1/jobs/" + std::to_string(job), admin);
    if (j && json::parse(j->body).value("state", "") == "SCHEDULED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // The checkpoint: incompressible bytes, written once.
  const int64_t bytes = int64_t{mib} << 20;
  {
    std::mt19937_64 rng(1);
    auto w = common::Env::Default()->NewAtomicFile(dir + "/step-1.ckpt", {});
    if (!w.ok()) return Fail(w.status().ToString());
    std::string block(1 << 20, '\0');
    for (int64_t done = 0; done < bytes; done += block.size()) {
      for (size_t i = 0; i < block.size(); i += 8) {
        const uint64_t x = rng();
        std::memcpy(block.data() + i, &x, 8);
      }
      if (auto st = (*w)->Append(block); !st.ok()) return Fail(st.ToString());
    }
    if (auto st = (*w)->Commit(); !st.ok()) return Fail(st.ToString());
  }

  storage::DirCheckpointStore local(dir + "/local-store");
  storage::HttpCheckpointStoreOptions ho;
  ho.server_url = "http://127.0.0.1:" + std::to_string(port);
  ho.token = [node_token] { return node_token; };
  ho.chunk_bytes = static_cast<size_t>(chunk_mib) << 20;
  storage::HttpCheckpointStore blob(ho);
  // A node downloads only while the job holds it, and this bench's node sends no heartbeats (it
  // goes down mid-run); it never deletes (docs/checkpoints.md). Downloads and clean-up are an
  // admin's: the bytes take the same path.
  storage::HttpCheckpointStoreOptions admin_options = ho;
  const std::string admin_token = (*server)->bootstrap().admin_token;
  admin_options.token = [admin_token] { return admin_token; };
  storage::HttpCheckpointStore blob_admin(admin_options);

  std::vector<double> local_up, local_down, blob_up, blob_down;
  for (int r = 0; r < 2 * rounds; ++r) {
    const bool use_blob = (r % 2 == 1);
    storage::CheckpointStore& store = use_blob ? static_cast<storage::CheckpointStore&>(blob)
                                               : static_cast<storage::CheckpointStore&>(local);
    auto src = storage::CheckpointSource::OpenInDir(dir, "step-1.ckpt", bytes);
    if (!src.ok()) return Fail(src.status().ToString());
    auto t0 = std::chrono::steady_clock::now();
    auto put = store.Put(job, r + 1, json::object(), **src);
    const double up_s = Seconds(t0);
    if (!put.ok()) return Fail(put.status().ToString());
    t0 = std::chrono::steady_clock::now();
    storage::CheckpointStore& owner = use_blob ? static_cast<storage::CheckpointStore&>(blob_admin)
                                               : static_cast<storage::CheckpointStore&>(local);
    auto got = owner.Get(job, put->id, dir + "/fetched.ckpt");
    const double down_s = Seconds(t0);
    if (!got.ok()) return Fail(got.status().ToString());
    if (auto st = owner.Delete(job, put->id); !st.ok()) return Fail(st.ToString());
    std::filesystem::remove(dir + "/fetched.ckpt");
    (use_blob ? blob_up : local_up).push_back(bytes / up_s / 1e6);
    (use_blob ? blob_down : local_down).push_back(bytes / down_s / 1e6);
  }

  dup2(saved_stderr, STDERR_FILENO);
  const double lu = Median(local_up), ld = Median(local_down);
  const double bu = Median(blob_up), bd = Median(blob_down);
  std::printf("checkpoint of %d MiB, %d rounds each (medians), chunks of %d MiB\n", mib, rounds,
              chunk_mib);
  std::printf("  local directory  upload %8.1f MB/s   download %8.1f MB/s\n", lu, ld);
  std::printf("  blob store HTTP  upload %8.1f MB/s   download %8.1f MB/s\n", bu, bd);
  std::printf("  ratio blob/local upload %8.2f        download %8.2f\n", bu / lu, bd / ld);
  std::printf("%s\n", json{{"bench", "checkpoint_store"},
                           {"mib", mib},
                           {"rounds", rounds},
                           {"chunk_mib", chunk_mib},
                           {"local_upload_mb_s", lu},
                           {"local_download_mb_s", ld},
                           {"blob_upload_mb_s", bu},
                           {"blob_download_mb_s", bd},
                           {"upload_ratio", bu / lu},
                           {"download_ratio", bd / ld}}
                          .dump()
                          .c_str());
  server->reset();
  std::filesystem::remove_all(dir);
  return 0;
}
