// What a job's processes may reach on the network: its own agent, its peers, nothing else.
//
// Jobs share the node's network namespace (multi-node ranks reach each other on the nodes'
// addresses, and an image job keeps the host's network too: agent/launch/container_config.h),
// so confinement is by uid: every process of a job runs as the job's uid (agent/sandbox/sandbox.h)
// and every socket it opens carries that uid. The agent owns one nftables table (family inet,
// named after its data directory, so two agents on one machine never share it) and gives each
// running job a chain that its uids' packets jump to, in the output hook:
//
//   - TCP to the job's agent endpoints (its node's job-local API, and the other nodes' agents its
//     rsh launcher asks for daemons) is accepted;
//   - traffic leaving the node (not through `lo`) to an address of the job's allocation is
//     accepted, any protocol and port: gloo, NCCL and Open MPI pick their ports at run time;
//   - TCP over `lo` (loopback, and every address of this node: the kernel delivers those through
//     `lo` too) is accepted and its connection marked with the job's uid (conntrack mark); see
//     below for who may answer it;
//   - everything else is rejected: a TCP reset, or ICMP administratively prohibited, so a
//     script fails at once instead of waiting for a timeout. DNS is not allowed: jobs get their
//     peers as addresses.
//
// Ingress on the node. A connection a job opens over `lo` may be answered only by a socket of the
// same job: the listener's SYN-ACK leaves through the output hook carrying the listener's uid
// (nft `meta skuid`: the credentials of whoever created the socket), and the table accepts it
// only when the pair (listener uid, connection mark) is one of the job's. Only the SYN-ACK is
// checked: the packets after it may carry no uid (a connection not yet accept()ed, TIME_WAIT). The
// answer of any other socket (another job's, PostgreSQL's, the control plane's, any root daemon's)
// is dropped and the connection marked refused, and the client's retransmitted SYN (about one
// second later) is rejected with a TCP reset: connect() fails with ECONNREFUSED. A closed port
// answers with a reset at once. A socket of a uid in the job range held by no job of this agent (a
// job of another agent on the same machine, as in the local test stack) may answer, since two
// agents on one machine share the range and their peers are each other's jobs.
//
// Why this way. nft 1.0.6 cannot tell, on the input side, which uid holds the socket a loopback
// packet is for: the skb has lost its owner by then, and the `socket` expression matches only a
// listener's mark, transparency, wildcard bind or cgroup v2 path (not every node has a cgroup v2
// per job). The output hook does see the listener's uid on its answer, and conntrack carries the
// originator's mark to it, so the check is made there.
//
// What is not covered: Unix sockets (abstract ones included) and shared memory are not network;
// jobs of other agents on the same machine are not told apart; an open port costs a refused
// connection about a second, a closed one none, which a job can time. The table owns the
// conntrack mark of the connections job uids open over `lo` (a job uid, bit 31 once refused):
// other software on the node must not set marks on those.
//
// A job uid's processes that outlive their job's rules (left by an agent that crashed) fall to
// a `stale` set at the next agent's start, taken from the table it replaces: rejected until they
// are stopped (ForgetStale).
//
// The rules are applied through nftables' library in the agent's process (agent/sandbox/nft.h),
// in the network namespace the table was created in; where the library does not load, or another
// nft program is named (`--nft`), that program is spawned.
//
// Nothing a tenant sends reaches an nft command line: uids are the pool's numbers, addresses
// and ports come from the server's assignment and are parsed as IP literals and numbers first,
// and the script goes to `nft -f -` on its standard input, spawned without a shell.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/sandbox/nft.h"
#include "common/status.h"

namespace agent {

// The agent's table and the job uid range (SandboxOptions).
struct JobNetworkTable {
  std::string name;  // letters, digits and '_' only
  uid_t uid_first = 0;
  uid_t uid_last = 0;
};

// An IP address and a TCP port.
struct NetworkEndpoint {
  std::string address;
  int port = 0;
};

// What one running job may reach.
struct JobNetworkGrant {
  std::vector<uid_t> uids;              // the job's uids on this node; the first names its chain
  std::vector<NetworkEndpoint> agents;  // agents' APIs it may call (over `lo` too)
  std::vector<std::string> peers;       // addresses of every node of its allocation
};

// `text` as an IPv4 or IPv6 literal, in its canonical form (inet_ntop of inet_pton); anything
// else (names, prefixes, zone ids, spaces) is invalid_argument.
common::Result<std::string> CanonicalIp(const std::string& text);

// The host and port of an http(s) URL whose host is an IP literal ("http://10.0.0.5:8471",
// "https://[fd00::1]:443/"); invalid_argument otherwise (a port is required).
common::Result<NetworkEndpoint> EndpointOfUrl(const std::string& url);

// The nft scripts, pure. The table's, replacing any table of that name (a crashed agent's):
// the sets, the verdict map, the output chain and the answer check, with `stale` uids rejected.
common::Result<std::string> TableScript(const JobNetworkTable& table,
                                        const std::vector<uid_t>& stale);
std::string DeleteTableScript(const JobNetworkTable& table);
std::string FlushStaleScript(const JobNetworkTable& table);
// A job's chain and its uids' entries, replacing the job's earlier ones; invalid_argument for an
// address or port that is not one, no uid, a uid outside the range, or a table name that is not
// one.
common::Result<std::string> GrantScript(const JobNetworkTable& table, const JobNetworkGrant& grant);
// Removes what GrantScript(table, {uids, ...}) added; applies also where there is nothing to
// remove (the script adds each entry before deleting it, in one transaction).
common::Result<std::string> RevokeScript(const JobNetworkTable& table,
                                         const std::vector<uid_t>& uids);

// The agent's table, live. Thread-safe: each call is one nft transaction.
class JobNetwork {
 public:
  // Replaces a table of that name, its jobs' uids becoming stale (rejected).
  static common::Result<std::unique_ptr<JobNetwork>> Create(JobNetworkTable table,
                                                            std::string nft = kDefaultNft);
  // The table stays: a job's processes outlive a crashed agent confined. Remove at a clean stop.
  ~JobNetwork();
  JobNetwork(const JobNetwork&) = delete;
  JobNetwork& operator=(const JobNetwork&) = delete;

  // Where this node's jobs reach their agent; every grant includes it. Set before any Grant.
  void SetLocalAgent(NetworkEndpoint endpoint);
  // Adds `grant` and this node's agent; failed_precondition before SetLocalAgent.
  common::Status Grant(JobNetworkGrant grant);
  common::Status Revoke(const std::vector<uid_t>& uids);
  // Empties the stale set, once what an earlier agent left is stopped: its uids, free again, may
  // serve the agent itself (image pulls) or a job, which its grant confines.
  common::Status ForgetStale();
  // Deletes the table (a clean stop, when no job runs).
  common::Status Remove();

  const JobNetworkTable& table() const { return table_; }

 private:
  JobNetwork(JobNetworkTable table, std::unique_ptr<Nft> nft);
  common::Status Apply(const std::string& script);

  const JobNetworkTable table_;
  const std::unique_ptr<Nft> nft_;
  std::mutex mu_;
  std::optional<NetworkEndpoint> local_agent_;
};

}  // namespace agent
