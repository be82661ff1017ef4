// Elementwise launches on the cuda device: one output and up to three inputs that broadcast to
// the output's shape, any strides, any element types, one scalar functor (the same functors as
// the CPU, ops/elementwise_functors.h).
//
//   launch_elementwise<float, float, float>(out, {&a, &b}, BinaryFn<BinaryOp::add>{});
//
// Note [Elementwise layout on the device]: the host coalesces dims exactly as the CPU loops do
// (make_layout, Note [Coalescing] in ops/elementwise_layout.h) and passes the result BY VALUE in a
// fixed-size struct (like PyTorch's OffsetCalculator): no device copy of shapes, no sync. When
// every operand is one unit-stride run (`dense`), the kernel is a plain grid-stride loop;
// otherwise each thread turns its linear index into per-operand offsets with one divmod per
// (coalesced) dim.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/elementwise_layout.h"

namespace ember::cuda {

constexpr int kMaxElementwiseDims = 12;  // make_layout's limit too
constexpr unsigned kElementwiseThreads = 256;

// N operands ([0] the output), their data pointers, the coalesced shape and each operand's
// strides in elements (0 where broadcast).
template <int N>
struct StridedOperands {
  char* data[N];
  int dims;
  int64_t sizes[kMaxElementwiseDims];
  int64_t strides[N][kMaxElementwiseDims];
};

// Element offsets of linear (row-major) index i for every operand.
template <int N>
__device__ __forceinline__ void operand_offsets(const StridedOperands<N>& a, int64_t i, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = a.dims - 1; d >= 0; --d) {
    const int64_t c = i % a.sizes[d];
    i /= a.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += c * a.strides[k][d];
  }
}

__device__ __forceinline__ int64_t global_thread_index() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return int64_t(blockDim.x) * gridDim.x; }

template <class Out, class... In, class F, size_t... K>
__device__ __forceinline__ void apply_at(const StridedOperands<1 + sizeof...(In)>& a, const int64_t* off, const F& f,
                                         std::index_sequence<K...>) {
  reinterpret_cast<Out*>(a.data[0])[off[0]] = f(reinterpret_cast<const In*>(a.data[K + 1])[off[K + 1]]...);
}

// out[i] = f(in0[i], ...) over n elements; every operand unit-stride.
template <class F, class Out, class... In>
__global__ void elementwise_dense_kernel(int64_t n, StridedOperands<1 + sizeof...(In)> a, F f) {
  for (int64_t i = global_thread_index(); i < n; i += grid_threads()) {
    int64_t off[1 + sizeof...(In)];
    for (auto& o : off) o = i;
    apply_at<Out, In...>(a, off, f, std::index_sequence_for<In...>{});
  }
}

// The same over any strides: out[off0(i)] = f(in0[off1(i)], ...).
template <class F, class Out, class... In>
__global__ void elementwise_strided_kernel(int64_t n, StridedOperands<1 + sizeof...(In)> a, F f) {
  for (int64_t i = global_thread_index(); i < n; i += grid_threads()) {
    int64_t off[1 + sizeof...(In)];
    operand_offsets(a, i, off);
    apply_at<Out, In...>(a, off, f, std::index_sequence_for<In...>{});
  }
}

// The device form of a host layout.
template <int N>
StridedOperands<N> strided_operands(const ElementwiseLayout& L) {
  EMBER_CHECK(L.operands == N, "elementwise: expected ", N, " operands, got ", L.operands);
  EMBER_CHECK(L.shape.size() <= size_t(kMaxElementwiseDims), "elementwise: at most ", kMaxElementwiseDims,
              " dims after coalescing, got ", L.shape.size());
  StridedOperands<N> a{};
  a.dims = int(L.shape.size());
  for (int k = 0; k < N; ++k) a.data[k] = L.data[k];
  for (int d = 0; d < a.dims; ++d) {
    a.sizes[d] = L.shape[size_t(d)];
    for (int k = 0; k < N; ++k) a.strides[k][d] = L.strides[k][size_t(d)];
  }
  return a;
}

// Runs f over a prepared layout (operand 0 of type Out, then In...) on the default stream.
template <class Out, class... In, class F>
void launch_elementwise(const ElementwiseLayout& L, F f) {
  if (L.numel == 0) return;
  const auto a = strided_operands<1 + int(sizeof...(In))>(L);
  const unsigned blocks = blocks_for(L.numel, kElementwiseThreads);
  if (L.dense) launch<elementwise_dense_kernel<F, Out, In...>>(blocks, kElementwiseThreads, 0, Stream{}, L.numel, a, f);
  else launch<elementwise_strided_kernel<F, Out, In...>>(blocks, kElementwiseThreads, 0, Stream{}, L.numel, a, f);
}

template <class Out, class... In, class F>
void launch_elementwise(const Tensor& out, std::initializer_list<const Tensor*> inputs, F f) {
  launch_elementwise<Out, In...>(make_layout(out, inputs), f);
}

}  // namespace ember::cuda
