// Creation and random kernels: arange, uniform, normal, randint. The random ones follow Note
// [Philox layout] (ops/cpu/fill.cpp) and share the per-block math with the CPU
// (ops/random_functors.h): one thread computes one Philox block (its values reach memory through
// shared memory, Note [Coalesced random fills]), so the numbers equal the CPU's for one seed
// (uniforms and integers bitwise; normals up to the device's sin/cos/log, within 1e-6).
#include "ops/cuda/elementwise_loops.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/random_functors.h"

namespace ember::cuda {
namespace {

// out: (n,) contiguous; out[i] = start + i * step, computed in double as on the CPU.
template <class T>
__global__ void arange_kernel(int64_t n, double start, double step, T* out) {
  for (int64_t i = global_thread_index(); i < n; i += grid_threads()) out[i] = static_cast<T>(start + double(i) * step);
}

template <class T>
struct UniformDraw {
  static constexpr int per_block = values_per_block<T>;
  T low, span;
  EMBER_HOST_DEVICE void operator()(const uint32_t* w, T* v) const { uniform_values<T>(w, v, low, span); }
};

template <class T>
struct NormalDraw {
  static constexpr int per_block = values_per_block<T>;
  T mean, std;
  EMBER_HOST_DEVICE void operator()(const uint32_t* w, T* v) const { normal_values<T>(w, v, mean, std); }
};

template <class T>
struct RandintDraw {
  static constexpr int per_block = randint_per_block;
  int64_t low;
  uint64_t span;
  EMBER_HOST_DEVICE void operator()(const uint32_t* w, T* v) const {
    for (int j = 0; j < per_block; ++j) v[j] = randint_value<T>(w, j, low, span);
  }
};

// Note [Coalesced random fills]: a thread that draws one Philox block writes its per_block
// values side by side, so a warp's store covers 4 (or 2) bytes in every 16 and uses a quarter
// (half) of the sectors it touches. The block stages its draws in shared memory instead and
// writes them back element by element along the threads: every store is consecutive. The
// staging index pads one element per 32 (staged_index), so the strided writes into shared memory
// hit 32 distinct banks.
__device__ __forceinline__ int staged_index(int e) { return e + e / 32; }

// out: (n,) contiguous; values [b * per_block, (b + 1) * per_block) come from Philox block
// first_block + b of `seed`. One thread per block of values, grid-stride by whole thread blocks
// (kElementwiseThreads threads; Note [Coalesced random fills]).
template <class T, class Draw>
__global__ void philox_kernel(int64_t n, uint64_t seed, uint64_t first_block, Draw draw, T* out) {
  constexpr int kPer = Draw::per_block, kSpan = int(kElementwiseThreads) * kPer;
  __shared__ T staged[kSpan + kSpan / 32];
  const int t = int(threadIdx.x);
  for (int64_t base = blockIdx.x * int64_t(kSpan); base < n; base += int64_t(gridDim.x) * kSpan) {
    uint32_t w[4];
    philox_block(seed, first_block + uint64_t(base / kPer + t), w);
    T v[kPer];
    draw(w, v);
    for (int j = 0; j < kPer; ++j) staged[staged_index(t * kPer + j)] = v[j];
    __syncthreads();
    for (int j = 0; j < kPer; ++j) {
      const int e = j * int(kElementwiseThreads) + t;
      if (base + e < n) out[base + e] = staged[staged_index(e)];
    }
    __syncthreads();  // staged is rewritten by the next iteration
  }
}

template <class T, class Draw>
void launch_philox(const Tensor& out, const Generator& gen, uint64_t first_block, Draw draw) {
  const int64_t n = out.numel(), blocks = (n + Draw::per_block - 1) / Draw::per_block;
  if (n == 0) return;
  launch<philox_kernel<T, Draw>>(blocks_for(blocks, kElementwiseThreads), kElementwiseThreads, 0, Stream{}, n,
                                 gen.seed(), first_block, draw, out.data<T>());
}

}  // namespace

void arange(const Tensor& out, double start, double step) {
  dispatch_arithmetic(out.dtype(), "arange", [&]<class T>(TypeTag<T>) {
    const int64_t n = out.numel();
    if (n == 0) return;
    launch<arange_kernel<T>>(blocks_for(n, kElementwiseThreads), kElementwiseThreads, 0, Stream{}, n, start, step,
                             out.data<T>());
  });
}

void uniform(const Tensor& out, const Generator& gen, uint64_t first_block, double low, double high) {
  dispatch_float(out.dtype(), "rand", [&]<class T>(TypeTag<T>) {
    launch_philox<T>(out, gen, first_block, UniformDraw<T>{T(low), T(high - low)});
  });
}

void normal(const Tensor& out, const Generator& gen, uint64_t first_block, double mean, double std) {
  dispatch_float(out.dtype(), "randn", [&]<class T>(TypeTag<T>) {
    launch_philox<T>(out, gen, first_block, NormalDraw<T>{T(mean), T(std)});
  });
}

void randint(const Tensor& out, const Generator& gen, uint64_t first_block, int64_t low, int64_t high) {
  const uint64_t span = uint64_t(high - low);
  if (out.dtype() == DType::i64) launch_philox<int64_t>(out, gen, first_block, RandintDraw<int64_t>{low, span});
  else if (out.dtype() == DType::i32) launch_philox<int32_t>(out, gen, first_block, RandintDraw<int32_t>{low, span});
  else EMBER_FAIL("randint: expected dtype i64 or i32, got ", dtype_name(out.dtype()));
}

void bind_fill_kernels() {
  ember::arange_kernel.set_cuda(&cuda::arange);
  ember::uniform_kernel.set_cuda(&cuda::uniform);
  ember::normal_kernel.set_cuda(&cuda::normal);
  ember::randint_kernel.set_cuda(&cuda::randint);
}

}  // namespace ember::cuda
