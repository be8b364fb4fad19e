#include "agent/node/node_probe.h"

#include <gtest/gtest.h>

#include "agent/node/nvml_probe.h"

namespace agent {
namespace {

TEST(NodeProbeTest, NoNvmlMeansNoGpus) {
  EXPECT_TRUE(ProbeNvmlGpus("/nonexistent/libnvidia-ml.so.1").empty());
  // A library that loads but is not NVML: missing symbols, still no GPUs and no crash.
  EXPECT_TRUE(ProbeNvmlGpus("libc.so.6").empty());
}

TEST(NodeProbeTest, SlotsOverrideAndMemory) {
  NodeResources r = ProbeNode(5, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(r.cpu_slots, 5);
  EXPECT_GT(r.memory_bytes, 0);
  EXPECT_FALSE(r.hostname.empty());
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_GE(ProbeNode(0, "/nonexistent").cpu_slots, 1);
}

TEST(NodeProbeTest, ParseMemTotal) {
  EXPECT_EQ(ParseMemTotal("MemFree:  10 kB\nMemTotal:       16384 kB\n"), 16384 * 1024);
  EXPECT_EQ(ParseMemTotal("nothing here\n"), 0);
}

}  // namespace
}  // namespace agent
