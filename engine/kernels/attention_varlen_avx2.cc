// The AVX2 + FMA copy of the varlen attention kernels (this file alone gets -mavx2 -mfma in
// engine/kernels/CMakeLists.txt); runs only where engine/cpu/cpu_path.h found AVX2.
#define EMBODY_VARLEN_TABLE Avx2VarlenKernels
#define EMBODY_VARLEN_NAME "avx2"
#include "engine/kernels/attention_varlen_body.inc"
