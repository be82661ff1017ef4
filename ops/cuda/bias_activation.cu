// The backward of `y = act(z + bias)` on CUDA: dz = act'(y) * dy and db = dz summed over every
// dim but the bias's, in one pass (the CPU's ops/cpu/bias_activation.cpp; Note [Epilogue
// activations] in ops/activation.h). Tensors are (outer, C, inner).
//
// Note [Two bias layouts]: a convolution's channel is a run of `inner` contiguous elements per
// outer index, so one block per channel reads its runs coalesced. A linear layer's channel is a
// column (inner = 1): one block per channel would read one element per row at stride C, so that
// layout gets a (32, 8) block over 32 adjacent columns instead, whose warps read 32 adjacent
// elements of a row, and which sums its 8 row-partials in shared memory. Both sum in double and
// in a fixed order: the result is deterministic.
#include "ops/cuda/block_reduce.cuh"
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/gemm_reduced.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {


constexpr unsigned kThreads = 256;
constexpr unsigned kColumns = 32, kRowLanes = 8;  // the column kernel's block

// dz may alias dy (no __restrict__ on either): every element is read before it is written.
//
// dy, y, dz (outer, C, inner) -> db (C); grid (C), block kThreads. dz (and y) null: sum only.
template <class T, class Act>
__global__ void channel_kernel(Act act, int64_t outer, int64_t C, int64_t inner, const T* dy,
                               const T* __restrict__ y, T* dz, T* __restrict__ db) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  double partial = 0;
  for (int64_t i = threadIdx.x; i < outer * inner; i += blockDim.x) {
    const int64_t at = (i / inner * C + c) * inner + i % inner;
    T v = dy[at];
    if (dz) dz[at] = v = act.backward(v, y[at]);
    partial += double(v);
  }
  const double total = block_reduce(partial, scratch, Sum{});
  if (threadIdx.x == 0) db[c] = T(total);
}

// dy, y, dz (outer, C) -> db (C); grid (ceil(C / 32)), block (32, 8) (Note [Two bias layouts]).
template <class T, class Act>
__global__ void column_kernel(Act act, int64_t outer, int64_t C, const T* dy, const T* __restrict__ y,
                              T* dz, T* __restrict__ db) {
  __shared__ double partials[kRowLanes][kColumns + 1];
  const int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  double partial = 0;
  if (c < C) {
    for (int64_t r = threadIdx.y; r < outer; r += kRowLanes) {
      const int64_t at = r * C + c;
      T v = dy[at];
      if (dz) dz[at] = v = act.backward(v, y[at]);
      partial += double(v);
    }
  }
  partials[threadIdx.y][threadIdx.x] = partial;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double total = 0;
    for (unsigned r = 0; r < kRowLanes; ++r) total += partials[r][threadIdx.x];
    db[c] = T(total);
  }
}

// dz = act'(y) * dy elementwise, when no bias gradient is wanted.
template <class T, class Act>
__global__ void mask_kernel(Act act, int64_t n, const T* dy, const T* __restrict__ y, T* dz) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    dz[i] = act.backward(dy[i], y[i]);
}

template <class T>
void bias_activation_backward(Activation act, int64_t outer, int64_t C, int64_t inner, const T* dy, const T* y,
                              T* dz, T* db, Stream stream) {
  if (C == 0) return;
  visit_activation(act, [&](auto fn) {
    using Act = decltype(fn);
    if (!db) {
      if (!dz) return;
      const int64_t n = outer * C * inner;
      if (n > 0) launch<mask_kernel<T, Act>>(blocks_for(n, kThreads), kThreads, 0, stream, fn, n, dy, y, dz);
    } else if (inner == 1) {
      const unsigned blocks = unsigned((C + kColumns - 1) / kColumns);
      launch<column_kernel<T, Act>>(blocks, dim3(kColumns, kRowLanes), 0, stream, fn, outer, C, dy, y, dz, db);
    } else {
      launch<channel_kernel<T, Act>>(unsigned(C), kThreads, 0, stream, fn, outer, C, inner, dy, y, dz, db);
    }
  });
}

void bias_activation_backward_cuda(Activation act, const Tensor& dy, const Tensor& y, const Tensor& dz,
                                   const Tensor& db) {
  if (is_reduced_float(dy.dtype())) {  // bf16/f16 linear and conv2d on cuda: widened, rounded once
    const Tensor dy32 = reduced::widened_copy(dy), y32 = reduced::widened_copy(y);
    const TensorOptions f32{.dtype = DType::f32, .device = dy.device()};
    const Tensor dz32 = dz.defined() ? Tensor::empty(dz.shape(), f32) : Tensor();
    const Tensor db32 = db.defined() ? Tensor::empty(db.shape(), f32) : Tensor();
    bias_activation_backward_cuda(act, dy32, y32, dz32, db32);
    if (dz.defined()) reduced::store_copy(dz32, dz);  // dz may alias dy: dy32 was copied first
    if (db.defined()) reduced::store_copy(db32, db);
    return;
  }
  dispatch_float(dy.dtype(), "bias_activation_backward", [&]<class T>(TypeTag<T>) {
    bias_activation_backward<T>(act, dy.size(0), dy.size(1), dy.size(2), dy.data<T>(), data_or_null<T>(y),
                                data_or_null<T>(dz), data_or_null<T>(db), {});
  });
}

}  // namespace

void bind_bias_activation_kernels() { ember::bias_activation_backward_kernel.set_cuda(&bias_activation_backward_cuda); }

}  // namespace ember::cuda
