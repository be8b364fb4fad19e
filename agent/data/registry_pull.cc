#include "agent/data/registry_pull.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent/sandbox/sandbox.h"
#include "agent/sandbox/spawn.h"
#include "api/dataset_ref.h"
#include "common/file_util.h"

namespace agent {

using nlohmann::json;

namespace {

const json* SourceOf(const json& spec) {
  if (!spec.is_object() || spec.value("kind", "") != "import") return nullptr;
  auto imp = spec.find("import");
  if (imp == spec.end() || !imp->is_object()) return nullptr;
  auto src = imp->find("source");
  if (src == imp->end() || !src->is_object()) return nullptr;
  return &*src;
}

}  // namespace

bool IsRegistryPull(const json& spec) {
  const json* src = SourceOf(spec);
  return src != nullptr && src->contains("registry");
}

common::Result<RegistryPull> RegistryPullOf(const json& spec) {
  const json* src = SourceOf(spec);
  if (src == nullptr) return common::InvalidArgument("not an import job", "import.source");
  EMBODY_ASSIGN_OR_RETURN(
      source, api::ParseImportSource(*src, "import.source", api::ImportSourceFrom::kServer));
  if (!source.is_pull()) return common::InvalidArgument("not a pull", "import.source");
  RegistryPull p;
  const json& id = spec["import"].contains("dataset_id") ? spec["import"]["dataset_id"] : json();
  if (id.is_number_integer()) p.dataset_id = id.get<int64_t>();
  if (p.dataset_id <= 0) {
    return common::InvalidArgument("import job without a dataset id", "import.dataset_id");
  }
  EMBODY_ASSIGN_OR_RETURN(registry, api::ParseRegistryUrl(source.registry, source.registry_url,
                                                          "import.source.registry_url"));
  EMBODY_ASSIGN_OR_RETURN(reference,
                          api::ParseImageReference(source.reference, "import.source.reference"));
  p.registry = std::move(registry);
  p.reference = std::move(reference);
  return p;
}

std::string NodeImageArchitecture() {
  struct utsname u {};
  if (::uname(&u) != 0) return "amd64";
  const std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64" || m == "arm64") return "arm64";
  if (m == "i386" || m == "i686") return "386";
  return m;  // ppc64le, s390x, riscv64 are OCI's names too
}

std::vector<std::string> SkopeoPullArgv(const RegistryPullOptions& o, const RegistryPull& pull,
                                        const std::string& archive, const std::string& work_dir) {
  std::vector<std::string> argv{
      o.skopeo,
      "--policy=" + work_dir + "/policy.json",
      "--registries.d=" + work_dir + "/registries.d",
      "--tmpdir=" + work_dir,
      "--override-os=" + o.os,
      "--override-arch=" + (o.arch.empty() ? NodeImageArchitecture() : o.arch),
      "--command-timeout=" + std::to_string(o.timeout.count()) + "s",
      "copy",
      "--retry-times=2",
      std::string("--src-tls-verify=") + (pull.registry.tls_verify ? "true" : "false")};
  if (o.auth_file.empty()) {
    argv.push_back("--src-no-creds");
  } else {
    argv.push_back("--src-authfile=" + o.auth_file);
  }
  // "--" ends the options: what follows are the two images, whatever they hold. Both are built
  // from parsed parts (a host, a reference that starts with a letter or digit, an agent path).
  argv.push_back("--");
  argv.push_back("docker://" + pull.registry.host + "/" + pull.reference.ToString());
  argv.push_back("oci-archive:" + archive);
  return argv;
}

common::Status PullImage(const RegistryPullOptions& o, const RegistryPull& pull,
                         const std::string& archive, const std::function<bool()>& stop) {
  namespace fs = std::filesystem;
  // oci-archive reads "PATH:TAG": a path with ':' would be cut.
  if (archive.empty() || archive.front() != '/' || archive.find(':') != std::string::npos) {
    return common::InvalidArgument("the pull's archive path must be absolute, without ':'");
  }
  std::error_code ec;
  if (fs::exists(fs::symlink_status(archive, ec))) {
    return common::Internal(archive + " exists already");
  }
  const std::string work = archive + ".skopeo";
  // What skopeo writes: inside its own directory, taken out below once checked.
  const std::string written = work + "/image.tar";
  fs::remove_all(work, ec);
  if (::mkdir(work.c_str(), 0700) != 0) {
    return common::Internal("cannot make " + work + ": " + std::strerror(errno));
  }
  auto cleanup = [&](common::Status st) {
    fs::remove_all(work, ec);
    if (!st.ok()) fs::remove(archive, ec);
    return st;
  };
  RegistryPullOptions run = o;
  common::Status st = common::MakeDirs(work + "/registries.d");
  if (st.ok()) {
    st = common::WriteFileAtomic(work + "/policy.json",
                                 R"({"default":[{"type":"insecureAcceptAnything"}]})", 0600);
  }
  if (st.ok()) st = common::WriteFileAtomic(work + "/registries.conf", "", 0600);
  if (st.ok() && o.run_as && !o.auth_file.empty()) {
    // The operator's file is root's: skopeo reads a copy of it made for its uid.
    auto creds = common::ReadFile(o.auth_file);
    run.auth_file = work + "/auth.json";
    st = creds.ok() ? common::WriteFileAtomic(run.auth_file, *creds, 0600) : creds.status();
  }
  if (st.ok() && o.run_as) {
    // Everything in its directory becomes the uid's, the directory last.
    for (const auto& e : fs::recursive_directory_iterator(work, ec)) {
      if (::lchown(e.path().c_str(), o.run_as->uid, o.run_as->gid) != 0) {
        st = common::Internal("cannot hand " + e.path().string() + " to the pull's uid: " +
                              std::strerror(errno));
        break;
      }
    }
    if (st.ok() && ::chown(work.c_str(), o.run_as->uid, o.run_as->gid) != 0) {
      st = common::Internal("cannot hand " + work + " to the pull's uid: " + std::strerror(errno));
    }
  }
  if (!st.ok()) return cleanup(st);

  SpawnRequest req;
  req.argv = SkopeoPullArgv(run, pull, written, work);
  if (o.run_as) req.credentials = JobCredentials{o.run_as->uid, o.run_as->gid, std::nullopt};
  req.env = {"PATH=/usr/bin:/bin",
             "HOME=" + work,
             "TMPDIR=" + work,
             "XDG_RUNTIME_DIR=" + work,
             "CONTAINERS_REGISTRIES_CONF=" + work + "/registries.conf",
             "LANG=C"};
  req.cwd = work;
  req.output_path = work + "/skopeo.log";
  req.limits = {{RLIMIT_FSIZE, o.max_file_bytes}};
  req.no_new_privs = true;
  auto pid = SpawnInNewSession(req);
  if (!pid.ok()) {
    return cleanup(common::FailedPrecondition("cannot run " + o.skopeo +
                                              " (install skopeo): " + pid.status().message()));
  }
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  int status = 0;
  bool stopped = false, timed_out = false;
  for (;;) {
    const pid_t r = ::waitpid(*pid, &status, WNOHANG);
    if (r == *pid || (r < 0 && errno != EINTR)) break;
    if (!stopped && !timed_out) {
      stopped = stop && stop();
      timed_out = std::chrono::steady_clock::now() > deadline;
      if (stopped || timed_out) ::kill(-*pid, SIGKILL);  // skopeo and anything it started
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Nothing of the pull's uid outlives skopeo (a process it left could change its directory
  // under the checks below).
  if (o.run_as) KillAllOfUid(o.run_as->uid);
  const std::string what = "docker://" + pull.registry.host + "/" + pull.reference.ToString();
  if (stopped) return cleanup(common::Unavailable("the pull of " + what + " was stopped"));
  if (timed_out) {
    return cleanup(common::Unavailable("the pull of " + what + " took longer than " +
                                       std::to_string(o.timeout.count()) + " s"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string log = OutputTail(work + "/skopeo.log");
    // Past RLIMIT_FSIZE a C program dies of SIGXFSZ; Go (skopeo) ignores it and fails the write
    // with EFBIG, "file too large".
    if ((WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) ||
        log.find("file too large") != std::string::npos) {
      return cleanup(common::FailedPrecondition(
          "the pull of " + what + " wrote a file past this node's limit of " +
          std::to_string(o.max_file_bytes) + " bytes (embody-agent --image-pull-max-gib)" +
          (log.empty() ? "" : ": " + log)));
    }
    return cleanup(
        common::FailedPrecondition("skopeo cannot pull " + what + ": " +
                                   (log.empty() ? "exit status " + std::to_string(status) : log)));
  }
  // Taken only as a plain file skopeo's uid made, with no other name: a link to a file of the
  // node's (symbolic, or hard where the kernel lets one be made) is never taken for the image.
  const int fd = ::open(written.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat sb {};
  if (fd < 0 || ::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1 ||
      sb.st_uid != (o.run_as ? o.run_as->uid : ::geteuid())) {
    if (fd >= 0) ::close(fd);
    return cleanup(common::FailedPrecondition("skopeo left no archive of its own at " + written));
  }
  // The file checked, by its descriptor, is what gets the archive's name: not whatever the
  // name in skopeo's directory points at by then.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(fd);
  const bool taken = ::fchown(fd, ::geteuid(), ::getegid()) == 0 && ::fchmod(fd, 0600) == 0 &&
                     ::linkat(AT_FDCWD, by_fd.c_str(), AT_FDCWD, archive.c_str(),
                              AT_SYMLINK_FOLLOW) == 0;
  const int error = errno;
  ::close(fd);
  if (!taken) {
    return cleanup(common::Internal("cannot take the archive " + written + ": " +
                                    std::strerror(error)));
  }
  return cleanup(common::Status::Ok());
}

}  // namespace agent
