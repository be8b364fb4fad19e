// Two network namespaces joined by a bridge in the root namespace, for tests that run each agent
// on a machine of its own: the bridge holds the server's address (.1), each namespace one agent's
// (.2, .3), in 10.<second_octet>.N.0/24 with N from the pid, so parallel runs never meet. Needs
// root and `ip netns`. Names carry `prefix` and the pid, so suites apart from one another never
// share a namespace, link or bridge.
#pragma once

#include <string>

namespace embody::testing {

// `cmd` through bash, its output discarded; the exit status.
int Sh(const std::string& cmd);

class TwoNamespaces {
 public:
  // `prefix`: three letters that keep this suite's names apart; `second_octet`: the 10.X range.
  TwoNamespaces(const std::string& prefix, int second_octet);

  // Makes the namespaces, links and bridge (removing leftovers of the same names first) and
  // checks each namespace reaches the other and the bridge. False, with the failing command in
  // `failed` when given, if any step fails.
  bool Up(std::string* failed = nullptr);
  // Removes everything Up made; safe to call again.
  void Down();

  std::string tag;                      // from the pid
  std::string ns_a, ns_b;               // the namespaces
  std::string link_a, link_b;           // each namespace's end of its link to the bridge
  std::string server, addr_a, addr_b;   // the bridge's address and each namespace's

 private:
  std::string peer_a_, peer_b_, bridge_, subnet_;
};

}  // namespace embody::testing
