// The baseline x86-64 (SSE2) copy of the Eigen Linear kernels: built with the library's flags,
// the path of CPUs without AVX2 and of EMBODY_CPU_PATH=scalar. Eigen's default index type.
#define EMBODY_LINEAR_TABLE Sse2Kernels
#define EMBODY_LINEAR_NAME "sse2"
#include "engine/model/linear_fast_body.inc"
