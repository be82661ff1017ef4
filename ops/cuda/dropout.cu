// Dropout on CUDA with the CPU's keep rule (Note [Dropout layout] in ops/cpu/dropout.cpp):
// element i is kept when uniform_float(word i % 4 of Philox block first_block + i / 4) >= p.
// One thread per Philox block (4 elements), so each block is computed once; core/philox.h is
// the same function the CPU's Generator uses, so the masks are identical bit for bit.
#include "core/philox.h"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 256;

// x (n) -> y (n): y = keep ? x * scale : 0.
template <class T>
__global__ void dropout_kernel(int64_t n, const T* __restrict__ x, uint64_t seed, uint64_t first_block,
                               float threshold, T scale, T* __restrict__ y) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(blockDim.x) * gridDim.x) {
    uint32_t w[4];
    philox_block(seed, first_block + uint64_t(b), w);
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) {
      const int64_t i = b * 4 + j;
      y[i] = uniform_float(w[j]) >= threshold ? x[i] * scale : T(0);
    }
  }
}

template <class T>
void dropout(int64_t n, const T* x, uint64_t seed, uint64_t first_block, double p, T* y, Stream stream) {
  if (n == 0) return;
  launch<dropout_kernel<T>>(blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream, n, x, seed, first_block, float(p),
                            T(1.0 / (1.0 - p)), y);
}

void dropout_cuda(const Tensor& x, const Generator& gen, uint64_t first_block, double p, const Tensor& y) {
  dispatch_float(x.dtype(), "dropout", [&]<class T>(TypeTag<T>) {
    dropout<T>(x.numel(), x.data<T>(), gen.seed(), first_block, p, y.data<T>(), {});
  });
}

}  // namespace

void bind_dropout_kernels() { ember::dropout_kernel.set_cuda(&dropout_cuda); }

}  // namespace ember::cuda
