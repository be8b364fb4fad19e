#include "agent/node/gpu_collector.h"

#include <httplib.h>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "agent/heartbeat/event_queue.h"
#include "agent/local_api/local_api.h"
#include "agent/node/agent_metrics.h"
#include "agent/testing/test_util.h"

namespace agent {
namespace {

TEST(GpuCollectorTest, DcgmNamesUnitsAndLabels) {
  GpuSample g;
  g.index = 3;
  g.minor_number = 5;
  g.name = "NVIDIA L40S";
  g.uuid = "GPU-abc";
  g.memory_total_bytes = 48ull << 30;
  g.memory_used_bytes = (2ull << 30) + 1;  // a byte over 2048 MiB: DCGM reports whole MiB
  g.memory_free_bytes = (46ull << 30) - 1;
  g.gpu_util_percent = 99;
  g.memory_util_percent = 7;
  g.power_watts = 287.5;
  g.temperature_celsius = 70;
  std::string text = prometheus::TextSerializer().Serialize(DcgmFamilies({g}, "node-a"));
  const std::string l =
      R"({gpu="3",UUID="GPU-abc",device="nvidia5",modelName="NVIDIA L40S",Hostname="node-a"} )";
  for (const std::string& line :
       {"DCGM_FI_DEV_GPU_UTIL" + l + "99", "DCGM_FI_DEV_MEM_COPY_UTIL" + l + "7",
        "DCGM_FI_DEV_FB_USED" + l + "2048", "DCGM_FI_DEV_FB_FREE" + l + "47103",
        "DCGM_FI_DEV_POWER_USAGE" + l + "287.5", "DCGM_FI_DEV_GPU_TEMP" + l + "70",
        std::string("# TYPE DCGM_FI_DEV_GPU_UTIL gauge")}) {
    EXPECT_TRUE(Has(text, line)) << line << "\n" << text;
  }
  // Readings the device does not give are left out, not reported as 0.
  GpuSample bare;
  bare.uuid = "GPU-bare";
  text = prometheus::TextSerializer().Serialize(DcgmFamilies({bare}, "n"));
  EXPECT_EQ(text, "");
  EXPECT_TRUE(DcgmFamilies({}, "n").empty());
}

TEST(GpuCollectorTest, MetricsEndpointCarriesTheStandInsGpus) {
  auto nvml = Nvml::Open(EMBODY_FAKE_NVML);
  ASSERT_TRUE(nvml);
  GpuCollector gpus(nvml.get(), "node-a");
  AgentMetrics metrics;
  metrics.SetNode(4, 2);
  metrics.AddNodeCollector(&gpus);
  EventQueue events;
  LocalApi api([](int64_t) { return std::nullopt; }, &events, &metrics);
  auto port = api.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  httplib::Client client("127.0.0.1", *port);
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  const std::string g0 =
      R"({gpu="0",UUID="GPU-11111111-2222-3333-4444-555555555555",device="nvidia0",)"
      R"(modelName="NVIDIA H100 80GB HBM3",Hostname="node-a"} )";
  const std::string g1 =
      R"({gpu="1",UUID="GPU-66666666-7777-8888-9999-000000000000",device="nvidia1",)"
      R"(modelName="NVIDIA A100-SXM4-40GB",Hostname="node-a"} )";
  for (const std::string& line :
       {std::string("embody_node_gpus 2"), "DCGM_FI_DEV_GPU_UTIL" + g0 + "87",
        "DCGM_FI_DEV_MEM_COPY_UTIL" + g0 + "42", "DCGM_FI_DEV_FB_USED" + g0 + "1536",
        "DCGM_FI_DEV_FB_FREE" + g0 + "80384", "DCGM_FI_DEV_POWER_USAGE" + g0 + "312.456",
        "DCGM_FI_DEV_GPU_TEMP" + g0 + "61", "DCGM_FI_DEV_GPU_UTIL" + g1 + "0",
        "DCGM_FI_DEV_FB_USED" + g1 + "0", "DCGM_FI_DEV_FB_FREE" + g1 + "40960",
        "DCGM_FI_DEV_GPU_TEMP" + g1 + "33"}) {
    EXPECT_TRUE(Has(r->body, line)) << line << "\n" << r->body;
  }
  EXPECT_FALSE(Has(r->body, "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\""));  // not supported by GPU 1
  api.Stop();
}

TEST(GpuCollectorTest, NoNvmlNoGpuSeries) {
  GpuCollector gpus(nullptr, "node-a");
  EXPECT_TRUE(gpus.Collect().empty());
}

}  // namespace
}  // namespace agent
