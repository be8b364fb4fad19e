#include "agent/sandbox/nft.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "common/log.h"

namespace agent {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Runs `argv` with `input` on its stdin; its stdout and stderr come back. No shell.
common::Result<std::pair<int, std::string>> RunWithInput(const std::vector<std::string>& argv,
                                                         const std::string& input) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return common::Internal(Errno("pipe"));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return common::Internal(Errno("pipe"));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // nft exiting before it read the whole script must not cost this process a SIGPIPE: blocked
  // in this thread while writing, and a pending one taken back below.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    return common::Internal(Errno("fork"));
  }
  if (pid == 0) {
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  // Scripts are a few kilobytes and nft reads all before it writes much; still, write and read
  // together so neither side can block the other.
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  std::string output;
  int in_fd = input.empty() ? (::close(in[1]), -1) : in[1];
  int out_fd = out[0];
  while (out_fd >= 0) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {in_fd, POLLOUT, 0}};
    int n = ::poll(fds, in_fd >= 0 ? 2 : 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (in_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_fd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written >= input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      ssize_t r = ::read(out_fd, buf, sizeof buf);
      if (r > 0 && output.size() < (1 << 20)) output.append(buf, static_cast<size_t>(r));
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        ::close(out_fd);
        out_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  if (out_fd >= 0) ::close(out_fd);
  const timespec no_wait{};
  while (::sigtimedwait(&pipe_set, nullptr, &no_wait) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return std::make_pair(code, output);
}

}  // namespace

// nftables' own library, loaded at run time. Its functions are declared here from libnftables(3),
// whose interface has been stable since nftables 0.9: no headers package is needed.
class NftContext {
 public:
  // A context in the calling thread's network namespace; null without the library.
  static std::unique_ptr<NftContext> Open() {
    const Api* api = Load();
    if (api == nullptr) return nullptr;
    void* ctx = api->ctx_new(0);
    if (ctx == nullptr) return nullptr;
    api->buffer_output(ctx);
    api->buffer_error(ctx);
    return std::unique_ptr<NftContext>(new NftContext(api, ctx));
  }
  ~NftContext() { api_->ctx_free(ctx_); }
  NftContext(const NftContext&) = delete;
  NftContext& operator=(const NftContext&) = delete;

  // Runs `script` (`json`: listings in JSON) as nft -f would; nft's exit code and its output and
  // error text.
  std::pair<int, std::string> Run(const std::string& script, bool json) {
    std::lock_guard<std::mutex> lock(mu_);
    api_->output_set_flags(ctx_, json ? kOutputJson : 0);
    int rc = api_->run_cmd_from_buffer(ctx_, script.c_str());
    // Read both buffers every time: reading one rewinds it for the next command.
    const char* out = api_->get_output_buffer(ctx_);
    const char* err = api_->get_error_buffer(ctx_);
    std::string text = out != nullptr ? out : "";
    if (err != nullptr) text += err;
    return {rc == 0 ? 0 : 1, text};
  }

 private:
  static constexpr unsigned kOutputJson = 1u << 4;  // NFT_CTX_OUTPUT_JSON
  struct Api {
    void* (*ctx_new)(uint32_t);
    void (*ctx_free)(void*);
    int (*buffer_output)(void*);
    int (*buffer_error)(void*);
    const char* (*get_output_buffer)(void*);
    const char* (*get_error_buffer)(void*);
    void (*output_set_flags)(void*, unsigned);
    int (*run_cmd_from_buffer)(void*, const char*);
  };
  // The library, once per process (never unloaded); null where it is absent.
  static const Api* Load() {
    static const Api* api = []() -> const Api* {
      void* lib = ::dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) return nullptr;
      static Api a;
      bool ok = true;
      auto get = [&](auto& fn, const char* name) {
        void* sym = ::dlsym(lib, name);
        ok = ok && sym != nullptr;
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
      };
      get(a.ctx_new, "nft_ctx_new");
      get(a.ctx_free, "nft_ctx_free");
      get(a.buffer_output, "nft_ctx_buffer_output");
      get(a.buffer_error, "nft_ctx_buffer_error");
      get(a.get_output_buffer, "nft_ctx_get_output_buffer");
      get(a.get_error_buffer, "nft_ctx_get_error_buffer");
      get(a.output_set_flags, "nft_ctx_output_set_flags");
      get(a.run_cmd_from_buffer, "nft_run_cmd_from_buffer");
      if (!ok) common::LogWarn("libnftables lacks a function: nft is spawned instead");
      return ok ? &a : nullptr;
    }();
    return api;
  }
  NftContext(const Api* api, void* ctx) : api_(api), ctx_(ctx) {}

  const Api* const api_;
  void* const ctx_;
  std::mutex mu_;  // a context is not thread-safe
};

Nft::Nft(std::string program)
    : program_(std::move(program)),
      ctx_(program_ == kDefaultNft ? NftContext::Open() : nullptr) {}

Nft::~Nft() = default;

common::Result<std::pair<int, std::string>> Nft::Run(const std::string& script, bool json) {
  if (ctx_ != nullptr) return ctx_->Run(script, json);
  std::vector<std::string> argv = {program_};
  if (json) argv.push_back("-j");
  argv.insert(argv.end(), {"-f", "-"});
  return RunWithInput(argv, script);
}

common::Status Nft::Apply(const std::string& script) {
  auto ran = Run(script);
  if (!ran.ok()) return ran.status();
  if (ran->first == 0) return common::Status::Ok();
  std::string out = ran->second;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (ran->first == 127) {
    return common::FailedPrecondition("cannot run " + program_ + " (install nftables)");
  }
  return common::Internal("nft failed (exit " + std::to_string(ran->first) +
                          "): " + out.substr(0, 2000));
}

common::Status Nft::Usable() {
  if (::geteuid() != 0) return common::FailedPrecondition("the agent is not root");
  auto ran = Run("list tables\n");
  if (!ran.ok()) return ran.status();
  if (ran->first == 127) {
    return common::FailedPrecondition("no " + program_ + " (install nftables)");
  }
  if (ran->first != 0) {
    return common::FailedPrecondition(program_ +
                                      " cannot list tables: " + ran->second.substr(0, 500));
  }
  return common::Status::Ok();
}

}  // namespace agent
