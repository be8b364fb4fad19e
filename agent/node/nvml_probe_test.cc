// The NVML path against agent/testing/fake_nvml.c (EMBODY_FAKE_NVML): dlopen, symbols, values.
#include "agent/node/nvml_probe.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <gtest/gtest.h>

namespace agent {
namespace {

// Holds the stand-in loaded for the whole test, so the probe's dlopen gets this same instance
// and the stand-in's count of nvmlInit_v2 calls not yet shut down tells whether the probe
// cleaned up.
class NvmlProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = ::dlopen(EMBODY_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << ::dlerror();
    active_ = reinterpret_cast<int (*)()>(::dlsym(lib_, "fake_nvml_active"));
    ASSERT_NE(active_, nullptr);
  }
  void TearDown() override {
    if (lib_) ::dlclose(lib_);
  }
  int FakeNvmlActive() const { return active_(); }

  void* lib_ = nullptr;
  int (*active_)() = nullptr;
};

TEST_F(NvmlProbeTest, ReportsTheStandInsTwoGpus) {
  auto gpus = ProbeNvmlGpus(EMBODY_FAKE_NVML);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].memory_bytes, 80ll << 30);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpus[1].memory_bytes, 40ll << 30);
  EXPECT_EQ(FakeNvmlActive(), 0);  // nvmlShutdown matched nvmlInit
}

TEST_F(NvmlProbeTest, SamplesReadingsInNvmlUnitsAndPowerInWatts) {
  auto nvml = Nvml::Open(EMBODY_FAKE_NVML);
  ASSERT_TRUE(nvml);
  EXPECT_EQ(FakeNvmlActive(), 1);
  auto s = nvml->Sample();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(s[0].minor_number, 0);  // the stand-in has no nvmlDeviceGetMinorNumber: the index
  EXPECT_EQ(s[0].memory_total_bytes, 80ull << 30);
  EXPECT_EQ(s[0].memory_used_bytes, 1536ull << 20);
  EXPECT_EQ(s[0].memory_free_bytes, (80ull << 30) - (1536ull << 20));
  EXPECT_EQ(s[0].gpu_util_percent, 87u);
  EXPECT_EQ(s[0].memory_util_percent, 42u);
  ASSERT_TRUE(s[0].power_watts);
  EXPECT_DOUBLE_EQ(*s[0].power_watts, 312.456);
  EXPECT_EQ(s[0].temperature_celsius, 61u);
  EXPECT_EQ(s[1].uuid, "GPU-66666666-7777-8888-9999-000000000000");
  EXPECT_EQ(s[1].minor_number, 1);
  EXPECT_FALSE(s[1].power_watts);  // NVML_ERROR_NOT_SUPPORTED: left out, not zero
  EXPECT_EQ(s[1].temperature_celsius, 33u);
  nvml.reset();
  EXPECT_EQ(FakeNvmlActive(), 0);
}

TEST_F(NvmlProbeTest, InitFailureMeansNoGpus) {
  ::setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  EXPECT_FALSE(Nvml::Open(EMBODY_FAKE_NVML));
  EXPECT_TRUE(ProbeNvmlGpus(EMBODY_FAKE_NVML).empty());
  EXPECT_EQ(FakeNvmlActive(), 0);
  ::unsetenv("FAKE_NVML_INIT_FAIL");
  EXPECT_TRUE(Nvml::Open(EMBODY_FAKE_NVML));
}

TEST_F(NvmlProbeTest, MissingOrForeignLibraryMeansNoGpus) {
  EXPECT_FALSE(Nvml::Open("/nonexistent/libnvidia-ml.so.1"));
  EXPECT_FALSE(Nvml::Open("libc.so.6"));  // loads, but has no NVML symbols
  EXPECT_TRUE(ProbeNvmlGpus("/nonexistent/libnvidia-ml.so.1").empty());
}

}  // namespace
}  // namespace agent
