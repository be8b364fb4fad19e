#include "tests/support/netns.h"

#include <unistd.h>

#include <cstdlib>

namespace embody::testing {

int Sh(const std::string& cmd) {
  return std::system(("bash -c '" + cmd + "' >/dev/null 2>&1").c_str());
}

TwoNamespaces::TwoNamespaces(const std::string& prefix, int second_octet) {
  tag = std::to_string(::getpid() % 100000);
  subnet_ = "10." + std::to_string(second_octet) + "." + std::to_string(::getpid() % 200 + 20);
  ns_a = prefix + "-a-" + tag;
  ns_b = prefix + "-b-" + tag;
  // Interface names hold at most 15 characters: prefix (3) + 2 + tag (5) fits.
  link_a = prefix + "a" + tag;
  link_b = prefix + "b" + tag;
  peer_a_ = prefix + "pa" + tag;
  peer_b_ = prefix + "pb" + tag;
  bridge_ = prefix + "r" + tag;
  server = subnet_ + ".1";
  addr_a = subnet_ + ".2";
  addr_b = subnet_ + ".3";
}

bool TwoNamespaces::Up(std::string* failed) {
  Down();
  const std::string cmds[] = {
      "ip link add " + bridge_ + " type bridge",
      "ip addr add " + server + "/24 dev " + bridge_,
      "ip link set " + bridge_ + " up",
      "ip netns add " + ns_a,
      "ip netns add " + ns_b,
      "ip link add " + link_a + " type veth peer name " + peer_a_,
      "ip link add " + link_b + " type veth peer name " + peer_b_,
      "ip link set " + link_a + " netns " + ns_a,
      "ip link set " + link_b + " netns " + ns_b,
      "ip link set " + peer_a_ + " master " + bridge_ + " up",
      "ip link set " + peer_b_ + " master " + bridge_ + " up",
      "ip -n " + ns_a + " addr add " + addr_a + "/24 dev " + link_a,
      "ip -n " + ns_b + " addr add " + addr_b + "/24 dev " + link_b,
      "ip -n " + ns_a + " link set " + link_a + " up",
      "ip -n " + ns_b + " link set " + link_b + " up",
      "ip -n " + ns_a + " link set lo up",
      "ip -n " + ns_b + " link set lo up",
  };
  for (const auto& c : cmds) {
    if (Sh(c) != 0) {
      if (failed) *failed = c;
      return false;
    }
  }
  // The first ping may be lost while the bridge learns its ports (or br_netfilter decides).
  Sh("ip netns exec " + ns_a + " ping -c1 -W2 " + addr_b);
  return Sh("ip netns exec " + ns_a + " ping -c1 -W2 " + addr_b) == 0 &&
         Sh("ip netns exec " + ns_b + " ping -c1 -W2 " + server) == 0;
}

void TwoNamespaces::Down() {
  Sh("ip netns del " + ns_a);
  Sh("ip netns del " + ns_b);
  Sh("ip link del " + peer_a_);
  Sh("ip link del " + peer_b_);
  Sh("ip link del " + bridge_);
}

}  // namespace embody::testing
