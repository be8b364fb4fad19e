// nftables as the agent runs it (agent/sandbox/job_network.h writes the scripts): through
// nftables' own library (libnftables1, installed with the nft program) in the agent's process
// where it loads, otherwise the nft program with the script on its standard input, no shell.
//
// In process, a transaction costs about 0.1 ms; a spawned nft costs 5 to 30 ms on a busy node
// (its start, the libraries it loads), and job network confinement makes two per job. A library
// context acts in the network namespace of the thread that made it, as a spawned program acts in
// the spawning thread's.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace agent {

// The program name that means nftables as installed: its library where it loads, else `nft`.
inline constexpr const char* kDefaultNft = "nft";

class NftContext;

class Nft {
 public:
  // `program` kDefaultNft: the library where it loads, else the program of that name; any other
  // name or path: that program.
  explicit Nft(std::string program = kDefaultNft);
  ~Nft();
  Nft(const Nft&) = delete;
  Nft& operator=(const Nft&) = delete;

  // Runs `script` as `nft -f -` would (`json`: listings in JSON); nft's exit code (127: the
  // program could not be run) and its output and error text. Thread-safe.
  common::Result<std::pair<int, std::string>> Run(const std::string& script, bool json = false);
  // Run, with nft's own message in the error on failure.
  common::Status Apply(const std::string& script);
  // Whether this process can use nft (root, the library or program runs, the kernel answers).
  common::Status Usable();

  // Whether scripts go through the library.
  bool in_process() const { return ctx_ != nullptr; }

 private:
  const std::string program_;
  const std::unique_ptr<NftContext> ctx_;  // null: the program is spawned
};

}  // namespace agent
