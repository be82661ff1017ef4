// Row reductions over an (outer, n, inner) contiguous layout, shared by softmax and
// cross-entropy: row r = (o, j) is the n values at offsets (o * n + i) * inner + j.
//
//   launch_rows(SoftmaxForward<float>{x, y, log}, RowLayout{outer, n, inner}, stream);
//
// An Op says what one row computes:
//   using State = ...;                                       // POD, combinable, shuffleable
//   State identity() const;
//   State update(State s, int64_t at, int64_t i) const;      // element i of the row, at offset `at`
//   static State combine(State a, State b);
//   void write(const State& total, int64_t at, int64_t i) const;  // second pass over the row
//   void finish(const State& total, int64_t row) const;     // once per row, by one thread
//   static constexpr bool kWrites;                           // whether the second pass runs
//
// Note [Row mappings]: with inner == 1 a row is unit-stride: rows of up to kWarpRowMax values
// take one warp each (a few per block, reduced with shuffles only), longer rows one block each
// (warp shuffles, then shared memory). With inner > 1 neighbouring rows are neighbouring in
// memory, so one thread per row reads coalesced across the warp and needs no reduction.
#pragma once

#include <cmath>
#include <type_traits>

#include "ops/cuda/block_reduce.cuh"
#include "cuda/launch.h"

namespace ember::cuda {

constexpr int64_t kWarpRowMax = 1024;

struct RowLayout {
  int64_t outer, n, inner;
  __host__ __device__ int64_t rows() const { return outer * inner; }
  __host__ __device__ int64_t base(int64_t r) const { return r / inner * n * inner + r % inner; }
};

template <class T>
__device__ __forceinline__ T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return exp(x);
}
template <class T>
__device__ __forceinline__ T log_of(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x);
  else return log(x);
}
template <class T>
__device__ __forceinline__ T sqrt_of(T x) {
  if constexpr (std::is_same_v<T, float>) return sqrtf(x);
  else return sqrt(x);
}

// Note [Online softmax]: max and sum of exp(x - max) in one pass: a larger value rescales the
// sum so far by exp(old max - new max). -inf values add nothing (so a row of -inf and finite
// values needs no special case); NaN poisons the sum, as it does on the CPU.
// Non-finite rows end as PyTorch's (and the CPU's two-pass) softmax does, where a +inf gives
// exp(inf - inf) = NaN for the whole row: a new maximum adds exp(x - x), written x - x + 1
// (1, or NaN when x is +inf, without a second exp); and combine drops only the identity, not
// a part whose max is still -inf but whose sum a NaN has poisoned.
template <class T, class Acc>
struct OnlineMaxSum {
  T max;
  Acc sum;
  static __device__ __forceinline__ OnlineMaxSum identity() { return {T(-INFINITY), Acc(0)}; }
  __device__ __forceinline__ void add(T x) {
    if (x > max) {
      sum = sum * Acc(exp_of(T(max - x))) + Acc(T(x - x) + T(1));
      max = x;
    } else if (x != T(-INFINITY)) {
      sum += Acc(exp_of(T(x - max)));
    }
  }
  static __device__ __forceinline__ OnlineMaxSum combine(OnlineMaxSum a, OnlineMaxSum b) {
    if (a.max == T(-INFINITY) && a.sum == Acc(0)) return b;
    if (b.max == T(-INFINITY) && b.sum == Acc(0)) return a;
    const T m = a.max > b.max ? a.max : b.max;
    return {m, a.sum * Acc(exp_of(T(a.max - m))) + b.sum * Acc(exp_of(T(b.max - m)))};
  }
};

template <class T, class Acc>
__device__ __forceinline__ OnlineMaxSum<T, Acc> shuffle_xor(OnlineMaxSum<T, Acc> v, int lane_mask) {
  return {__shfl_xor_sync(kFullWarp, v.max, lane_mask), __shfl_xor_sync(kFullWarp, v.sum, lane_mask)};
}

namespace detail {

template <class Op>
struct CombineOf {
  __device__ __forceinline__ typename Op::State operator()(typename Op::State a, typename Op::State b) const {
    return Op::combine(a, b);
  }
};

// The threads [lane, lane + lanes, ...) of one row: accumulate, reduce with `reduce`, write.
template <class Op, class Reduce>
__device__ __forceinline__ void run_row(const Op& op, const RowLayout& l, int64_t row, int lane, int lanes,
                                        Reduce reduce) {
  const int64_t base = l.base(row);
  typename Op::State s = op.identity();
  for (int64_t i = lane; i < l.n; i += lanes) s = op.update(s, base + i * l.inner, i);
  s = reduce(s);
  if constexpr (Op::kWrites)
    for (int64_t i = lane; i < l.n; i += lanes) op.write(s, base + i * l.inner, i);
  if (lane == 0) op.finish(s, row);
}

// One warp per row; blockDim.x is a multiple of 32 and every lane of a warp has the same row.
template <class Op>
__global__ void rows_per_warp_kernel(Op op, RowLayout l) {
  const int64_t warps = blockDim.x / 32, rows = l.rows();
  for (int64_t row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += int64_t(gridDim.x) * warps)
    run_row(op, l, row, int(threadIdx.x % 32), 32,
            [](typename Op::State s) { return warp_reduce(s, CombineOf<Op>{}); });
}

// One block per row (long unit-stride rows).
template <class Op>
__global__ void rows_per_block_kernel(Op op, RowLayout l) {
  __shared__ typename Op::State scratch[32];
  for (int64_t row = blockIdx.x; row < l.rows(); row += gridDim.x)
    run_row(op, l, row, int(threadIdx.x), int(blockDim.x),
            [&](typename Op::State s) { return block_reduce(s, scratch, CombineOf<Op>{}); });
}

// One thread per row (inner > 1: rows interleaved in memory).
template <class Op>
__global__ void rows_per_thread_kernel(Op op, RowLayout l) {
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < l.rows(); row += int64_t(blockDim.x) * gridDim.x)
    run_row(op, l, row, 0, 1, [](typename Op::State s) { return s; });
}

}  // namespace detail

// Runs op over every row of l (Note [Row mappings]).
template <class Op>
void launch_rows(const Op& op, const RowLayout& l, Stream stream) {
  const int64_t rows = l.rows();
  if (rows == 0) return;
  if (l.inner > 1) {
    launch<detail::rows_per_thread_kernel<Op>>(blocks_for(rows, 256), 256, 0, stream, op, l);
  } else if (l.n <= kWarpRowMax) {
    constexpr unsigned kWarpsPerBlock = 4;
    launch<detail::rows_per_warp_kernel<Op>>(blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream, op, l);
  } else {
    launch<detail::rows_per_block_kernel<Op>>(blocks_for(rows, 1), 256, 0, stream, op, l);
  }
}

}  // namespace ember::cuda
