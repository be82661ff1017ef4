// init_cuda_backend() for builds with a CUDA backend (real or simulated); a build without one
// compiles ops/cuda/unavailable.cpp instead.
#include "ops/cuda/register.h"

#include "cuda/runtime.h"

namespace ember::cuda {

bool init_cuda_backend() {
  if (!cuda::init()) return false;
#define EMBER_CALL_BINDER(family) bind_##family##_kernels();
  EMBER_CUDA_KERNEL_FAMILIES(EMBER_CALL_BINDER)
#undef EMBER_CALL_BINDER
  return true;
}

}  // namespace ember::cuda
