// embody-image-probe: what an image job's tests run inside the container (static: the test image
// holds nothing else). `report` prints, one `key=value` a line, what the tests check from inside
// (uid and gid, files present or absent, whether $HOME is writable, the rank's variables);
// `sleep` waits for SIGTERM, says so and exits 143; `fail N` exits N; `alloc N` touches N MiB
// and says so.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

volatile sig_atomic_t stop = 0;
void OnTerm(int) { stop = 1; }

bool Exists(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "report";
  if (what == "sleep") {
    ::signal(SIGTERM, OnTerm);
    std::printf("sleeping\n");
    std::fflush(stdout);
    for (int i = 0; i < 6000 && !stop; ++i) ::usleep(10000);
    std::printf(stop ? "got SIGTERM\n" : "slept\n");
    return stop ? 143 : 0;
  }
  if (what == "fail") return argc > 2 ? std::atoi(argv[2]) : 1;
  if (what == "alloc") {
    // Touches every page of N MiB, one MiB at a time, kept: a memory limit stops it on the way.
    const int mib = argc > 2 ? std::atoi(argv[2]) : 0;
    for (int i = 0; i < mib; ++i) {
      char* block = static_cast<char*>(std::malloc(1 << 20));
      if (block == nullptr) {
        std::printf("malloc failed at %d MiB\n", i);
        return 12;
      }
      for (int off = 0; off < (1 << 20); off += 4096) block[off] = 1;
    }
    std::printf("allocated %d MiB\n", mib);
    return 0;
  }
  std::printf("uid=%d\ngid=%d\npid=%d\n", static_cast<int>(::getuid()),
              static_cast<int>(::getgid()), static_cast<int>(::getpid()));
  for (int i = 2; i < argc; ++i) std::printf("exists %s=%d\n", argv[i], Exists(argv[i]) ? 1 : 0);
  for (const char* var : {"HOME", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "EMBODY_JOB_ID", "EMBODY_AGENT_URL", "EMBODY_NODE_ADDRESS", "PYTHONPATH",
                          "EMBODY_DATASETS", "PATH", "IMAGE_GREETING"}) {
    const char* v = std::getenv(var);
    std::printf("%s=%s\n", var, v != nullptr ? v : "");
  }
  // The SDK is the first directory of PYTHONPATH (an image's own follow it).
  const char* python_path = std::getenv("PYTHONPATH");
  const std::string sdk = python_path != nullptr ? python_path : "";
  const std::string first = sdk.substr(0, sdk.find(':'));
  std::printf("sdk_visible=%d\n", !first.empty() && Exists(first.c_str()) ? 1 : 0);
  char cwd[4096] = {};
  std::printf("cwd=%s\n", ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "");
  const char* home = std::getenv("HOME");
  bool writable = false;
  if (home != nullptr) {
    const std::string path = std::string(home) + "/written-in-image";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      writable = std::fputs("hello\n", f) >= 0;
      std::fclose(f);
    }
  }
  std::printf("home_writable=%d\n", writable ? 1 : 0);
  FILE* root = std::fopen("/probe-root-write", "w");
  std::printf("root_writable=%d\n", root != nullptr ? 1 : 0);
  if (root != nullptr) std::fclose(root);
  return 0;
}
