// The head's wait for the other nodes of a multi-node image job (docs/byo.md "Environments"):
// each of them unpacks the job's image on its own as soon as it learns of its part
// (agent/rsh/rsh_bridge.h), and the head starts mpirun only once every one says it has it (GET
// /v1/local/jobs/{id}/image on its agent, with the job's token). Ranks that started on some
// nodes while another still unpacked, or could not, would only wait for their peers and time out
// in the collective's set-up, with a reason that says nothing of the image.
//
// Not a health check of the nodes: a node that stops answering is the server's to find (node
// loss); here it only ends the wait after `timeout`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct PeerImageWait {
  std::vector<api::HostSlot> nodes;  // the job's other nodes (agent_url set)
  int64_t job_id = 0;
  std::string job_token;  // the attempt's, which each node's bridge checks
  std::string ca_file;    // for https agent URLs ("": the system's CAs)
  std::string image;      // NAME@VERSION, for messages
  // How long a node may not know its part yet (404, or 401 for an earlier attempt's token): it
  // learns of it from its own next heartbeat.
  std::chrono::milliseconds unknown_grace{60'000};
  // How long the whole wait may take (a large image on a slow disk takes minutes to unpack).
  std::chrono::milliseconds timeout{30 * 60'000};
  std::chrono::milliseconds poll{500};
};

// Ok once every node has the image. failed_precondition, naming the node, when one cannot
// prepare it (with its reason), still does not know its part after unknown_grace, cannot be
// reached that long, or still prepares it at `timeout`; unavailable as soon as `stop()` says so
// (asked at each poll).
common::Status WaitForImageOnNodes(const PeerImageWait& wait, const std::function<bool()>& stop);

}  // namespace agent
