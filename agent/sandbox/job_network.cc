#include "agent/sandbox/job_network.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "common/log.h"
#include "common/parse_int.h"

namespace agent {
namespace {

// The conntrack mark bit of a connection whose answer was refused (job uids stay below it).
constexpr const char* kRefused = "0x80000000";

bool ValidTableName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return std::isalpha(static_cast<unsigned char>(name[0]));
}

std::string Prefix(const JobNetworkTable& table) { return " inet " + table.name + " "; }

std::string ChainOf(uid_t key) { return "job_" + std::to_string(key); }

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The entries of the sets and the map for `uids` (each uid answers each uid's connections).
struct Entries {
  std::string uids, pairs, jobs;
};
Entries EntriesOf(const std::vector<uid_t>& uids, const std::string& chain) {
  std::vector<std::string> u, pairs, jobs;
  for (uid_t a : uids) {
    u.push_back(std::to_string(a));
    jobs.push_back(std::to_string(a) + " : jump " + chain);
    for (uid_t b : uids) pairs.push_back(std::to_string(a) + " . " + std::to_string(b));
  }
  return {Join(u), Join(pairs), Join(jobs)};
}

// The lines that add `e` to the table's sets and map (`t`: " inet NAME ").
std::string AddEntries(const std::string& t, const Entries& e) {
  return "add element" + t + "uids { " + e.uids + " }\n" +   //
         "add element" + t + "marks { " + e.uids + " }\n" +  //
         "add element" + t + "same_job { " + e.pairs + " }\n" +
         "add element" + t + "jobs { " + e.jobs + " }\n";
}

common::Status CheckUids(const JobNetworkTable& table, const std::vector<uid_t>& uids) {
  if (!ValidTableName(table.name)) return common::InvalidArgument("bad nft table name");
  if (uids.empty()) return common::InvalidArgument("a job network grant needs a uid");
  std::set<uid_t> seen;
  for (uid_t u : uids) {
    if (u < table.uid_first || u > table.uid_last || u >= 0x80000000u) {
      return common::InvalidArgument("uid " + std::to_string(u) + " is not a job uid");
    }
    if (!seen.insert(u).second) return common::InvalidArgument("a uid named twice");
  }
  return common::Status::Ok();
}

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

common::Result<std::string> CanonicalIp(const std::string& text) {
  char buf[INET6_ADDRSTRLEN] = {};
  unsigned char bin[sizeof(in6_addr)];
  if (text.size() < INET6_ADDRSTRLEN) {
    if (::inet_pton(AF_INET, text.c_str(), bin) == 1 &&
        ::inet_ntop(AF_INET, bin, buf, sizeof buf) != nullptr) {
      return std::string(buf);
    }
    if (::inet_pton(AF_INET6, text.c_str(), bin) == 1 &&
        ::inet_ntop(AF_INET6, bin, buf, sizeof buf) != nullptr) {
      return std::string(buf);
    }
  }
  return common::InvalidArgument("not an IP address: \"" + text.substr(0, 64) + "\"");
}

common::Result<NetworkEndpoint> EndpointOfUrl(const std::string& url) {
  std::string rest;
  for (const char* scheme : {"http://", "https://"}) {
    if (url.rfind(scheme, 0) == 0) rest = url.substr(std::strlen(scheme));
  }
  const auto bad = [&] {
    return common::InvalidArgument("not an http(s) URL of an IP address and port: \"" +
                                   url.substr(0, 80) + "\"");
  };
  if (rest.empty()) return bad();
  rest = rest.substr(0, rest.find('/'));
  std::string host, port;
  if (rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return bad();
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return bad();
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  auto ip = CanonicalIp(host);
  if (!ip.ok()) return bad();
  if (rest.front() != '[' && ip->find(':') != std::string::npos) return bad();
  auto p = common::ParseInt(port, 1, 65535);
  if (!p.ok()) return bad();
  return NetworkEndpoint{*ip, *p};
}

common::Result<std::string> TableScript(const JobNetworkTable& table,
                                        const std::vector<uid_t>& stale) {
  if (!ValidTableName(table.name)) return common::InvalidArgument("bad nft table name");
  if (table.uid_first > table.uid_last) return common::InvalidArgument("empty job uid range");
  std::vector<std::string> stale_text;
  for (uid_t u : stale) stale_text.push_back(std::to_string(u));
  const std::string t = Prefix(table);
  const std::string range = std::to_string(table.uid_first) + "-" + std::to_string(table.uid_last);
  std::string s;
  // `add` then `delete`: whatever a crashed agent left goes, and a missing table is no error.
  s += "add table" + t + "\n";
  s += "delete table" + t + "\n";
  s += "table" + t + "{\n";
  s += "  set uids { type uid; }\n";             // every job uid with rules
  s += "  set marks { type mark; }\n";           // the same, as conntrack marks
  s += "  set same_job { type uid . mark; }\n";  // (answering uid . opening uid) of one job
  s += "  set stale { type uid;";
  if (!stale_text.empty()) s += " elements = { " + Join(stale_text) + " };";
  s += " }\n";
  s += "  map jobs { type uid : verdict; }\n";
  s += "  chain output {\n";
  s += "    type filter hook output priority filter; policy accept;\n";
  // A refused connection stays refused (the listener retransmits its SYN-ACK); the resets the
  // reject below sends go through.
  s += "    ct direction reply ct mark and " + std::string(kRefused) + " == " + kRefused +
       " tcp flags & rst == 0 drop\n";
  // Only the SYN-ACK names the answering socket: it leaves on behalf of the listener, whose uid
  // `meta skuid` reads. Later packets of an accepted connection may carry no uid at all (sent by
  // the kernel before accept(), or from TIME_WAIT), so the check is made once, there.
  s += "    ct direction reply ct mark @marks tcp flags & (syn | ack) == syn | ack jump answer\n";
  s += "    meta skuid vmap @jobs\n";
  s += "    meta skuid @stale meta l4proto tcp reject with tcp reset\n";
  s += "    meta skuid @stale reject with icmpx admin-prohibited\n";
  s += "  }\n";
  // The answer to a connection a job opened over lo: its own sockets, a closed port's reset, a
  // job of another agent on this machine; anything else refuses it.
  s += "  chain answer {\n";
  s += "    tcp flags & rst == rst accept\n";
  s += "    meta skuid . ct mark @same_job accept\n";
  s += "    meta skuid @uids ct mark set ct mark or " + std::string(kRefused) + " drop\n";
  s += "    meta skuid " + range + " accept\n";
  s += "    ct mark set ct mark or " + std::string(kRefused) + " drop\n";
  s += "  }\n";
  s += "}\n";
  return s;
}

std::string DeleteTableScript(const JobNetworkTable& table) {
  return "add table" + Prefix(table) + "\ndelete table" + Prefix(table) + "\n";
}

std::string FlushStaleScript(const JobNetworkTable& table) {
  return "flush set" + Prefix(table) + "stale\n";
}

common::Result<std::string> GrantScript(const JobNetworkTable& table,
                                        const JobNetworkGrant& grant) {
  EMBODY_RETURN_IF_ERROR(CheckUids(table, grant.uids));
  std::vector<std::string> v4, v6;
  for (const std::string& peer : grant.peers) {
    EMBODY_ASSIGN_OR_RETURN(ip, CanonicalIp(peer));
    auto& list = ip.find(':') == std::string::npos ? v4 : v6;
    if (std::find(list.begin(), list.end(), ip) == list.end()) list.push_back(ip);
  }
  std::vector<NetworkEndpoint> agents;
  for (const NetworkEndpoint& a : grant.agents) {
    EMBODY_ASSIGN_OR_RETURN(ip, CanonicalIp(a.address));
    if (a.port < 1 || a.port > 65535) {
      return common::InvalidArgument("not a port: " + std::to_string(a.port));
    }
    agents.push_back({ip, a.port});
  }
  const std::string t = Prefix(table);
  const std::string chain = ChainOf(grant.uids.front());
  const Entries e = EntriesOf(grant.uids, chain);
  const std::string rule = "add rule" + t + chain + " ";
  std::string s;
  s += "add chain" + t + chain + "\n";
  s += "flush chain" + t + chain + "\n";
  s += AddEntries(t, e);
  // A uid given again is no longer a crashed agent's.
  s += "add element" + t + "stale { " + e.uids + " }\n";
  s += "delete element" + t + "stale { " + e.uids + " }\n";
  s += rule + "ct direction original ct mark and " + kRefused + " == " + kRefused +
       " meta l4proto tcp reject with tcp reset\n";
  for (const NetworkEndpoint& a : agents) {
    const bool six = a.address.find(':') != std::string::npos;
    s += rule + (six ? "ip6" : "ip") + " daddr " + a.address + " tcp dport " +
         std::to_string(a.port) + " accept\n";
  }
  // nft cannot set a mark from `meta skuid` (types differ): one rule per uid.
  for (uid_t u : grant.uids) {
    s += rule + "meta skuid " + std::to_string(u) +
         " oifname \"lo\" meta l4proto tcp ct state new ct mark set " + std::to_string(u) + "\n";
  }
  s += rule + "oifname \"lo\" meta l4proto tcp accept\n";
  if (!v4.empty()) s += rule + "oifname != \"lo\" ip daddr { " + Join(v4) + " } accept\n";
  if (!v6.empty()) s += rule + "oifname != \"lo\" ip6 daddr { " + Join(v6) + " } accept\n";
  s += rule + "meta l4proto tcp reject with tcp reset\n";
  s += rule + "reject with icmpx admin-prohibited\n";
  return s;
}

common::Result<std::string> RevokeScript(const JobNetworkTable& table,
                                         const std::vector<uid_t>& uids) {
  EMBODY_RETURN_IF_ERROR(CheckUids(table, uids));
  const std::string t = Prefix(table);
  const std::string chain = ChainOf(uids.front());
  const Entries e = EntriesOf(uids, chain);
  std::string s;
  // Each entry is added first, so that deleting it cannot fail for its absence.
  s += "add chain" + t + chain + "\n";
  s += AddEntries(t, e);
  s += "delete element" + t + "jobs { " + e.uids + " }\n";
  s += "delete element" + t + "same_job { " + e.pairs + " }\n";
  s += "delete element" + t + "marks { " + e.uids + " }\n";
  s += "delete element" + t + "uids { " + e.uids + " }\n";
  s += "flush chain" + t + chain + "\n";
  s += "delete chain" + t + chain + "\n";
  return s;
}

// nftables' own library (libnftables1, which the nft program is a front end of), loaded at run
// time: a transaction in process costs about 0.1 ms, against 5 to 30 ms for a spawned nft on a
// busy node, twice on every job's launch path. Declared here from libnftables(3), whose interface
// has been stable since nftables 0.9: no headers package is needed, and an agent on a node
// without the library (or told to use another nft program) spawns the program instead.
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

namespace {

// The default program name means "nftables, however it is installed": the library when it loads.
std::unique_ptr<NftContext> ContextFor(const std::string& nft) {
  return nft == kDefaultNft ? NftContext::Open() : nullptr;
}

// `script` through `ctx` or, without one, the program `nft` (`-f -`, no shell).
common::Result<std::pair<int, std::string>> Nft(const std::string& nft, NftContext* ctx,
                                                const std::string& script, bool json = false) {
  if (ctx != nullptr) return ctx->Run(script, json);
  std::vector<std::string> argv = {nft};
  if (json) argv.push_back("-j");
  argv.insert(argv.end(), {"-f", "-"});
  return RunWithInput(argv, script);
}

common::Status NftStatus(const std::string& nft,
                         const common::Result<std::pair<int, std::string>>& ran) {
  if (!ran.ok()) return ran.status();
  if (ran->first == 0) return common::Status::Ok();
  std::string out = ran->second;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (ran->first == 127)
    return common::FailedPrecondition("cannot run " + nft + " (install nftables)");
  return common::Internal("nft failed (exit " + std::to_string(ran->first) +
                          "): " + out.substr(0, 2000));
}

common::Status Usable(const std::string& nft, NftContext* ctx) {
  if (::geteuid() != 0) return common::FailedPrecondition("the agent is not root");
  auto ran = Nft(nft, ctx, "list tables\n");
  if (!ran.ok()) return ran.status();
  if (ran->first == 127) return common::FailedPrecondition("no " + nft + " (install nftables)");
  if (ran->first != 0) {
    return common::FailedPrecondition(nft + " cannot list tables: " + ran->second.substr(0, 500));
  }
  return common::Status::Ok();
}

std::vector<uid_t> UidsIn(const std::string& nft, NftContext* ctx, const std::string& table) {
  std::vector<uid_t> out;
  if (!ValidTableName(table)) return out;
  auto ran = Nft(nft, ctx, "list set inet " + table + " uids\n", /*json=*/true);
  if (!ran.ok() || ran->first != 0) return out;  // no such table
  auto j = nlohmann::json::parse(ran->second, nullptr, false);
  if (!j.is_object() || !j.contains("nftables") || !j["nftables"].is_array()) return out;
  for (const auto& item : j["nftables"]) {
    if (!item.is_object() || !item.contains("set")) continue;
    const auto& set = item["set"];
    if (!set.is_object() || !set.contains("elem") || !set["elem"].is_array()) continue;
    for (const auto& e : set["elem"]) {
      if (e.is_number_unsigned()) out.push_back(e.get<uid_t>());
    }
  }
  return out;
}

}  // namespace

common::Status RunNft(const std::string& nft, const std::string& script) {
  auto ctx = ContextFor(nft);
  return NftStatus(nft, Nft(nft, ctx.get(), script));
}

common::Status NftUsable(const std::string& nft) {
  auto ctx = ContextFor(nft);
  return Usable(nft, ctx.get());
}

std::vector<uid_t> UidsInTable(const std::string& nft, const std::string& table) {
  auto ctx = ContextFor(nft);
  return UidsIn(nft, ctx.get(), table);
}

common::Result<std::unique_ptr<JobNetwork>> JobNetwork::Create(JobNetworkTable table,
                                                               std::string nft) {
  std::unique_ptr<NftContext> ctx = ContextFor(nft);
  EMBODY_RETURN_IF_ERROR(Usable(nft, ctx.get()));
  std::vector<uid_t> stale;
  for (uid_t u : UidsIn(nft, ctx.get(), table.name)) {
    if (u >= table.uid_first && u <= table.uid_last) stale.push_back(u);
  }
  EMBODY_ASSIGN_OR_RETURN(script, TableScript(table, stale));
  EMBODY_RETURN_IF_ERROR(NftStatus(nft, Nft(nft, ctx.get(), script)));
  if (!stale.empty()) {
    common::LogWarn(
        "replaced the job network table an earlier agent left; its jobs' uids have no "
        "network until they are stopped",
        {{"table", table.name}, {"uids", std::to_string(stale.size())}});
  }
  return std::unique_ptr<JobNetwork>(
      new JobNetwork(std::move(table), std::move(nft), std::move(ctx)));
}

JobNetwork::JobNetwork(JobNetworkTable table, std::string nft, std::unique_ptr<NftContext> ctx)
    : table_(std::move(table)), nft_(std::move(nft)), ctx_(std::move(ctx)) {}

JobNetwork::~JobNetwork() = default;

common::Status JobNetwork::Apply(const std::string& script) {
  return NftStatus(nft_, Nft(nft_, ctx_.get(), script));
}

void JobNetwork::SetLocalAgent(NetworkEndpoint endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  local_agent_ = std::move(endpoint);
}

common::Status JobNetwork::Grant(JobNetworkGrant grant) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!local_agent_) return common::FailedPrecondition("the job-local API is not listening yet");
    grant.agents.insert(grant.agents.begin(), *local_agent_);
  }
  EMBODY_ASSIGN_OR_RETURN(script, GrantScript(table_, grant));
  return Apply(script);
}

common::Status JobNetwork::Revoke(const std::vector<uid_t>& uids) {
  EMBODY_ASSIGN_OR_RETURN(script, RevokeScript(table_, uids));
  return Apply(script);
}

common::Status JobNetwork::ForgetStale() { return Apply(FlushStaleScript(table_)); }

common::Status JobNetwork::Remove() { return Apply(DeleteTableScript(table_)); }

}  // namespace agent
