// The baseline x86-64 (SSE2) copy of the varlen attention kernels (attention_varlen_kernels.h).
#define EMBODY_VARLEN_TABLE Sse2VarlenKernels
#define EMBODY_VARLEN_NAME "sse2"
#include "engine/kernels/attention_varlen_body.inc"
