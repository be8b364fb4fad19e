#include "agent/sandbox/job_network.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

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

namespace {

std::vector<uid_t> UidsIn(Nft& nft, const std::string& table) {
  std::vector<uid_t> out;
  if (!ValidTableName(table)) return out;
  auto ran = nft.Run("list set inet " + table + " uids\n", /*json=*/true);
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

common::Result<std::unique_ptr<JobNetwork>> JobNetwork::Create(JobNetworkTable table,
                                                               std::string nft) {
  auto runner = std::make_unique<Nft>(std::move(nft));
  EMBODY_RETURN_IF_ERROR(runner->Usable());
  std::vector<uid_t> stale;
  for (uid_t u : UidsIn(*runner, table.name)) {
    if (u >= table.uid_first && u <= table.uid_last) stale.push_back(u);
  }
  EMBODY_ASSIGN_OR_RETURN(script, TableScript(table, stale));
  EMBODY_RETURN_IF_ERROR(runner->Apply(script));
  if (!stale.empty()) {
    common::LogWarn(
        "replaced the job network table an earlier agent left; its jobs' uids have no "
        "network until they are stopped",
        {{"table", table.name}, {"uids", std::to_string(stale.size())}});
  }
  return std::unique_ptr<JobNetwork>(new JobNetwork(std::move(table), std::move(runner)));
}

JobNetwork::JobNetwork(JobNetworkTable table, std::unique_ptr<Nft> nft)
    : table_(std::move(table)), nft_(std::move(nft)) {}

JobNetwork::~JobNetwork() = default;

common::Status JobNetwork::Apply(const std::string& script) { return nft_->Apply(script); }

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
