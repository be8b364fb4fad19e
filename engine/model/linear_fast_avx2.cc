// The AVX2 + FMA copy of the Eigen Linear kernels (this file alone gets -mavx2 -mfma, in
// engine/model/CMakeLists.txt); runs only where engine/cpu/cpu_path.h found AVX2. `int` as
// Eigen's index type keeps its instantiations apart from the other copies' (linear_kernels.h):
// the dispatcher sends only products whose every matrix has fewer than 2^31 elements here.
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int
#define EMBODY_LINEAR_TABLE Avx2Kernels
#define EMBODY_LINEAR_NAME "avx2"
#include "engine/model/linear_fast_body.inc"
