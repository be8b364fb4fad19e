// The AVX-512 copy of the varlen attention kernels (this file alone gets -mavx512f and friends in
// engine/kernels/CMakeLists.txt); runs only where engine/cpu/cpu_path.h found AVX-512 F/BW/VL.
#define EMBODY_VARLEN_TABLE Avx512VarlenKernels
#define EMBODY_VARLEN_NAME "avx512"
#include "engine/kernels/attention_varlen_body.inc"
