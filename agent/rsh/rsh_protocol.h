// The words of the rsh bridge (docs/multinode.md): what mpirun passes to `embody-agent rsh`,
// what of it a node's agent agrees to start, and the frames the daemon's output and exit travel
// back in. Pure functions, so every rule is unit-tested without a network or a process.
//
// Open MPI 4.1's rsh launcher runs `<plm_rsh_agent words> HOST <daemon command words>`, the
// daemon command written for a remote shell: optional `NAME=value ; export NAME ;` statements
// (with --prefix) and then `orted --daemonize -mca ess "env" -mca ess_base_jobid "123" ...`, the
// quotes meant for that shell. ssh would join the words with spaces and hand them to the remote
// shell; the bridge joins them the same way but parses them itself and never runs a shell.
//
// The request comes from a job (mpirun runs as the job's uid, and a job may call the endpoint
// itself with any words), so ParseDaemonCommand takes only Open MPI's daemon with arguments:
// no other program, no shell operators, no expansion, bounded in size. The node's agent runs its
// own daemon binary (the one beside its mpirun), never the path the request names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

// Bounds of one request's daemon command.
inline constexpr size_t kMaxDaemonCommandBytes = 64 * 1024;
inline constexpr size_t kMaxDaemonWords = 1024;

// `embody-agent rsh --hosts FILE [-x] [-n] [-l USER] HOST WORD...` (args exclude "rsh").
struct RshInvocation {
  std::string hosts_file;  // JSON object: host address -> agent URL (written by the head agent)
  std::string ca_file;     // --ca-file: the CAs https agent URLs are verified with; "": system's
  std::string host;
  std::vector<std::string> words;
};
common::Result<RshInvocation> ParseRshArgs(const std::vector<std::string>& args);

struct DaemonCommand {
  std::string program;            // "orted" (Open MPI 4) or "prted" (Open MPI 5)
  std::vector<std::string> args;  // its arguments, unquoted
};
// invalid_argument (saying why) for anything but the daemon of Open MPI with its arguments.
common::Result<DaemonCommand> ParseDaemonCommand(const std::vector<std::string>& words);

// The daemon's arguments as this node runs it: attached (no --daemonize: the agent tracks the
// process, its output and exit, and ends it with the stream), and writing its ranks' output
// files under this node's job directory (`orte_output_filename` names the head's; its options
// after ':' are kept when they are the ones the head asks for).
std::vector<std::string> DaemonArgsForNode(const DaemonCommand& command,
                                           const std::string& ranks_dir);

// The response body of POST /v1/local/jobs/{id}/rsh: frames of one type byte, a 4-byte
// big-endian length and the payload.
enum class FrameType : char { kOutput = 'o', kKeepalive = 'k', kExit = 'x' };
inline constexpr size_t kMaxFramePayload = 64 * 1024;
std::string EncodeFrame(FrameType type, const std::string& payload);

struct Frame {
  FrameType type = FrameType::kKeepalive;
  std::string payload;
};
// Accumulates bytes and hands out whole frames; an unknown type or an oversized length is an
// error (the stream is not ours).
class FrameDecoder {
 public:
  void Feed(const char* data, size_t n);
  // The next whole frame, nullopt until one has arrived.
  common::Result<std::optional<Frame>> Next();

 private:
  std::string buffer_;
  size_t pos_ = 0;
};

}  // namespace agent
