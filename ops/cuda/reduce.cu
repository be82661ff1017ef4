// Reductions over the middle dim of an (outer, R, inner) view (any strides): sum, max, min, prod,
// mean and arg max/min. Both are one kernel family over a "combiner" (what a value is, how two
// combine, how a result is stored), so reduce and arg_reduce share every loop.
//
// Note [Reduction kernels]:
// - inner == 1 (reduce the last dim; the common case): the lanes of a group read one row with
//   stride 32/256 (coalesced) and combine with warp shuffles. The group is one warp per row,
//   or the whole block per row when there are few long rows (a full reduction), whose warps
//   then combine through shared memory.
// - inner > 1 (reduce a middle dim): column-parallel. A (32, 8) block owns 32 adjacent columns
//   (coalesced along inner); its 8 thread rows split R and combine through shared memory.
// Note [Float accumulation]: f32 sums accumulate in f32 (the CPU uses double), but as 32 or 256
// interleaved partial sums and a tree, so the error grows like log(R), not R: for R in the
// thousands it stays within a few 1e-7 relative to the CPU's result.
#include <limits>
#include <type_traits>

#include "ops/cuda/elementwise_loops.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kRowThreads = 256;   // 8 warps
constexpr int kColumns = 32, kColumnRows = 8;

// Warp shuffles of the value types (types under 4 bytes travel as int).
template <class T>
__device__ __forceinline__ T shuffle_down(T v, int delta) {
  if constexpr (sizeof(T) < 4) return T(__shfl_down_sync(0xffffffffu, int(v), delta));
  else return __shfl_down_sync(0xffffffffu, v, delta);
}

// Sum, max, min, product or mean in compute_t<T> (f32 for bf16 / f16, rounded once by store; a
// mean's sum divided by count = R first, in double; its f32 sum itself can overflow where the
// CPU's double sum does not, as sum's can). max/min propagate NaN (as the CPU).
template <class T, ReduceOp op>
struct ValueCombiner {
  using Value = compute_t<T>;
  T* out;
  double count = 1;
  static EMBER_HOST_DEVICE Value identity() {
    using L = std::numeric_limits<Value>;
    if constexpr (op == ReduceOp::sum || op == ReduceOp::mean) return Value(0);
    else if constexpr (op == ReduceOp::prod) return Value(1);
    else if constexpr (op == ReduceOp::max) return L::has_infinity ? -L::infinity() : L::lowest();
    else return L::has_infinity ? L::infinity() : L::max();
  }
  static EMBER_HOST_DEVICE Value load(T x, int64_t) { return Value(x); }
  static EMBER_HOST_DEVICE Value combine(Value a, Value b) {
    if constexpr (op == ReduceOp::sum || op == ReduceOp::mean) return a + b;
    else if constexpr (op == ReduceOp::prod) return a * b;
    else if constexpr (op == ReduceOp::max) return (b != b || b > a) ? b : a;
    else return (b != b || b < a) ? b : a;
  }
  static __device__ __forceinline__ Value shuffle(Value v, int delta) { return shuffle_down(v, delta); }
  EMBER_HOST_DEVICE void store(int64_t k, Value v) const {
    if constexpr (op == ReduceOp::mean) out[k] = T(compute_t<T>(double(v) / count));
    else out[k] = T(v);
  }
};

// The extreme value and its index along R; index -1 is "nothing yet". The first NaN wins, then
// the larger (smaller) value, then the smaller index: the CPU's sequential scan, as an
// associative and commutative rule.
template <class T>
struct ArgValue {
  T v;
  int64_t i;
};

template <class T, bool kMax>
struct ArgCombiner {
  using Value = ArgValue<compute_t<T>>;
  T* values;
  int64_t* indices;
  static EMBER_HOST_DEVICE Value identity() { return {compute_t<T>(0), -1}; }
  static EMBER_HOST_DEVICE Value load(T x, int64_t r) { return {compute_t<T>(x), r}; }
  static EMBER_HOST_DEVICE Value combine(Value a, Value b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
    if (a_nan || b_nan) return (a_nan && b_nan) ? (a.i < b.i ? a : b) : (a_nan ? a : b);
    if (kMax ? b.v > a.v : b.v < a.v) return b;
    if (kMax ? a.v > b.v : a.v < b.v) return a;
    return a.i < b.i ? a : b;
  }
  static __device__ __forceinline__ Value shuffle(Value v, int delta) {
    return {shuffle_down(v.v, delta), shuffle_down(v.i, delta)};
  }
  EMBER_HOST_DEVICE void store(int64_t k, Value v) const {
    values[k] = T(v.v);
    indices[k] = v.i;
  }
};

struct ReduceGeometry {
  int64_t outer, R, inner;
  int64_t s0, s1, s2;  // x's strides in elements
};

template <class C>
__device__ __forceinline__ typename C::Value warp_combine(typename C::Value v) {
  for (int delta = 16; delta > 0; delta /= 2) v = C::combine(v, C::shuffle(v, delta));
  return v;
}

// x: (outer, R, 1) -> out (outer,): one warp per row, or (kBlockPerRow) one block per row.
// Block: kRowThreads threads; grid-stride over rows.
template <class T, class C, bool kBlockPerRow>
__global__ void reduce_rows_kernel(ReduceGeometry g, const T* __restrict__ x, C c) {
  using V = typename C::Value;
  __shared__ V partial[kRowThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int group = kBlockPerRow ? blockDim.x : 32, rank = kBlockPerRow ? threadIdx.x : lane;
  const int rows_per_block = kBlockPerRow ? 1 : warps, slot = kBlockPerRow ? 0 : warp;
  for (int64_t row = blockIdx.x * int64_t(rows_per_block) + slot; row < g.outer;
       row += int64_t(gridDim.x) * rows_per_block) {
    const T* p = x + row * g.s0;
    V v = C::identity();
    for (int64_t r = rank; r < g.R; r += group) v = C::combine(v, C::load(p[r * g.s1], r));
    v = warp_combine<C>(v);
    if constexpr (kBlockPerRow) {
      if (lane == 0) partial[warp] = v;
      __syncthreads();
      if (warp == 0) {
        v = lane < warps ? partial[lane] : C::identity();
        v = warp_combine<C>(v);
        if (lane == 0) c.store(row, v);
      }
      __syncthreads();  // partial is rewritten for the next row
    } else {
      if (lane == 0) c.store(row, v);
    }
  }
}

// x: (outer, R, inner) -> out (outer, inner): block (32, 8) per 32 columns of one outer index;
// thread row y combines r = y, y + 8, ...; grid-stride over the column tiles.
template <class T, class C>
__global__ void reduce_columns_kernel(ReduceGeometry g, const T* __restrict__ x, C c) {
  using V = typename C::Value;
  __shared__ V partial[kColumnRows][kColumns];
  const int64_t tiles_per_outer = (g.inner + kColumns - 1) / kColumns;
  for (int64_t t = blockIdx.x; t < g.outer * tiles_per_outer; t += gridDim.x) {
    const int64_t o = t / tiles_per_outer, j = t % tiles_per_outer * kColumns + threadIdx.x;
    V v = C::identity();
    if (j < g.inner) {
      const T* p = x + o * g.s0 + j * g.s2;
      for (int64_t r = threadIdx.y; r < g.R; r += kColumnRows) v = C::combine(v, C::load(p[r * g.s1], r));
    }
    partial[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.y == 0 && j < g.inner) {
      for (int y = 1; y < kColumnRows; ++y) v = C::combine(v, partial[y][threadIdx.x]);
      c.store(o * g.inner + j, v);
    }
    __syncthreads();
  }
}

template <class T, class C>
void launch_reduce(const Tensor& x, C c) {
  const ReduceGeometry g{x.size(0), x.size(1), x.size(2), x.stride(0), x.stride(1), x.stride(2)};
  if (g.outer * g.inner == 0) return;
  const T* data = x.data<T>();
  if (g.inner == 1) {
    // Note [Reduction kernels]: a block per row when rows are few and long enough to fill it.
    if (g.outer < 64 && g.R >= 4 * int64_t(kRowThreads))
      launch<reduce_rows_kernel<T, C, true>>(unsigned(g.outer), kRowThreads, 0, Stream{}, g, data, c);
    else
      launch<reduce_rows_kernel<T, C, false>>(blocks_for(g.outer, kRowThreads / 32), kRowThreads, 0, Stream{}, g, data, c);
    return;
  }
  const int64_t tiles = g.outer * ((g.inner + kColumns - 1) / kColumns);
  launch<reduce_columns_kernel<T, C>>(unsigned(tiles < 4096 ? tiles : 4096), dim3(kColumns, kColumnRows), 0, Stream{},
                                       g, data, c);
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Tensor& out) {
  dispatch_arithmetic(x.dtype(), "reduce", [&]<class T>(TypeTag<T>) {
    T* o = out.data<T>();
    switch (op) {
      case ReduceOp::sum: return launch_reduce<T>(x, ValueCombiner<T, ReduceOp::sum>{o});
      case ReduceOp::prod: return launch_reduce<T>(x, ValueCombiner<T, ReduceOp::prod>{o});
      case ReduceOp::max: return launch_reduce<T>(x, ValueCombiner<T, ReduceOp::max>{o});
      case ReduceOp::min: return launch_reduce<T>(x, ValueCombiner<T, ReduceOp::min>{o});
      case ReduceOp::mean:
        if constexpr (std::is_floating_point_v<compute_t<T>>)
          return launch_reduce<T>(x, ValueCombiner<T, ReduceOp::mean>{o, double(x.size(1))});
        else EMBER_FAIL("mean: expected a floating tensor, got ", dtype_name(x.dtype()));
    }
  });
}

void arg_reduce(bool is_max, const Tensor& x, const Tensor& values, const Tensor& indices) {
  dispatch_arithmetic(x.dtype(), "argmax", [&]<class T>(TypeTag<T>) {
    if (is_max) launch_reduce<T>(x, ArgCombiner<T, true>{values.data<T>(), indices.data<int64_t>()});
    else launch_reduce<T>(x, ArgCombiner<T, false>{values.data<T>(), indices.data<int64_t>()});
  });
}

void bind_reduce_kernels() {
  ember::reduce_kernel.set_cuda(&cuda::reduce);
  ember::arg_reduce_kernel.set_cuda(&cuda::arg_reduce);
}

}  // namespace ember::cuda
