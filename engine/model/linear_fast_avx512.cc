// The AVX-512 copy of the Eigen Linear kernels (this file alone gets -mavx512f and friends, in
// engine/model/CMakeLists.txt); runs only where engine/cpu/cpu_path.h found AVX-512 F/BW/VL.
// `long long` as Eigen's index type (std::ptrdiff_t is `long`) keeps its instantiations apart
// from the other copies' (linear_kernels.h).
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE long long
#define EMBODY_LINEAR_TABLE Avx512Kernels
#define EMBODY_LINEAR_NAME "avx512"
#include "engine/model/linear_fast_body.inc"
