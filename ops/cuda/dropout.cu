// Dropout on CUDA with the CPU's keep rule (Note [Dropout layout] in ops/cpu/dropout.cpp):
// element i is kept when uniform_float(word i % 4 of Philox block first_block + i / 4) >= p.
// Each Philox block (4 elements) is computed once, by one lane (Note [Coalesced dropout]);
// core/philox.h is the same function the CPU's Generator uses, so the masks are identical bit
// for bit.
#include "core/philox.h"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 256;

// Note [Coalesced dropout]: a thread that computes one Philox block and then writes its 4
// elements makes every warp request touch 4 bytes in each 16 (one sector in four of what a
// request fetches is used). Instead each warp owns 128 consecutive elements: lane l computes
// Philox block base / 4 + l and its 4 keep bits, and in step j lane l handles element
// base + 32 j + l, reading its keep bit from the lane that computed its block (a shuffle), so
// every load and store is 32 consecutive elements and each block is still computed once.
constexpr int64_t kWarpElements = 4 * 32;

// x (n) -> y (n): y = keep ? x * scale : 0. blockDim.x a multiple of 32.
template <class T>
__global__ void dropout_kernel(int64_t n, const T* __restrict__ x, uint64_t seed, uint64_t first_block,
                               float threshold, T scale, T* __restrict__ y) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32, warps = int64_t(blockDim.x) * gridDim.x / 32;
  for (int64_t base = warp * kWarpElements; base < n; base += warps * kWarpElements) {  // whole warps iterate
    uint32_t w[4];
    philox_block(seed, first_block + uint64_t(base / 4 + lane), w);
    unsigned keep = 0;
    for (int j = 0; j < 4; ++j) keep |= unsigned(uniform_float(w[j]) >= threshold) << j;
    for (int j = 0; j < 4; ++j) {
      const int e = j * 32 + lane;  // element base + e is word e % 4 of lane e / 4's block
      const unsigned bits = __shfl_sync(0xffffffffu, keep, e / 4);
      const int64_t i = base + e;
      if (i < n) {
        const T v = x[i];  // read by every lane, kept or not: one request per step
        y[i] = (bits >> (e % 4) & 1u) ? v * scale : T(0);
      }
    }
  }
}

template <class T>
void dropout(int64_t n, const T* x, uint64_t seed, uint64_t first_block, double p, T* y, Stream stream) {
  if (n == 0) return;
  const int64_t threads = (n + kWarpElements - 1) / kWarpElements * 32;
  launch<dropout_kernel<T>>(blocks_for(threads, kThreads), kThreads, 0, stream, n, x, seed, first_block, float(p),
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
