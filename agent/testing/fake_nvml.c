/* A stand-in for libnvidia-ml, built by the agent's tests so the NVML path (dlopen, symbols,
 * unit conversions, DCGM names) is exercised on machines without a GPU. It implements only the
 * calls agent/node/nvml_probe.cc makes and describes two fixed GPUs:
 *
 *   0  "NVIDIA H100 80GB HBM3"   GPU-11111111-2222-3333-4444-555555555555
 *      80 GiB total, 1536 MiB used; util 87 % gpu, 42 % memory; 312456 mW; 61 C
 *   1  "NVIDIA A100-SXM4-40GB"   GPU-66666666-7777-8888-9999-000000000000
 *      40 GiB total, 0 used; util 0 %, 0 %; power NOT_SUPPORTED; 33 C
 *
 * With FAKE_NVML_INIT_FAIL set in the environment nvmlInit_v2 fails as it does without a driver.
 * fake_nvml_active() tells a test how many nvmlInit_v2 calls are not yet matched by nvmlShutdown.
 * nvmlDeviceGetMinorNumber is deliberately absent: the probe must manage without it. */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned gpu, memory;
} nvmlUtilization_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
};

struct nvmlDevice_st {
  const char* name;
  const char* uuid;
  unsigned long long total, used;
  unsigned util_gpu, util_memory;
  int power_mw; /* < 0: not supported */
  unsigned temperature;
};

static struct nvmlDevice_st devices[2] = {
    {"NVIDIA H100 80GB HBM3", "GPU-11111111-2222-3333-4444-555555555555", 80ull << 30,
     1536ull << 20, 87, 42, 312456, 61},
    {"NVIDIA A100-SXM4-40GB", "GPU-66666666-7777-8888-9999-000000000000", 40ull << 30, 0, 0, 0,
     -1, 33},
};
static int active = 0;

int fake_nvml_active(void) { return active; }

nvmlReturn_t nvmlInit_v2(void) {
  if (getenv("FAKE_NVML_INIT_FAIL") != NULL) return NVML_ERROR_DRIVER_NOT_LOADED;
  ++active;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (active == 0) return NVML_ERROR_UNINITIALIZED;
  --active;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (active == 0) return NVML_ERROR_UNINITIALIZED;
  *count = 2;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  if (active == 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= 2) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

static nvmlReturn_t CopyText(const char* text, char* out, unsigned length) {
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(out, text);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned length) {
  return CopyText(d->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned length) {
  return CopyText(d->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* memory) {
  memory->total = d->total;
  memory->used = d->used;
  memory->free = d->total - d->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* utilization) {
  utilization->gpu = d->util_gpu;
  utilization->memory = d->util_memory;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* milliwatts) {
  if (d->power_mw < 0) return NVML_ERROR_NOT_SUPPORTED;
  *milliwatts = (unsigned)d->power_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* celsius) {
  if (sensor != 0) return NVML_ERROR_NOT_SUPPORTED;
  *celsius = d->temperature;
  return NVML_SUCCESS;
}
