// init_cuda_backend() for a build without a CUDA backend (EMBER_CUDA=OFF, or AUTO without
// nvcc): there are no CUDA kernels to bind, and the device is unavailable.
#include "ops/cuda/register.h"

namespace ember::cuda {

bool init_cuda_backend() { return false; }

}  // namespace ember::cuda
