// Row and column L2 normalisation on CUDA (contract in ops/kernels.h, the formulas in Note [Fused
// row normalisation] in ops/normalize.cpp, the CPU reference in ops/cpu/normalize.cpp), as row
// operations of rows.cuh: a row-major x takes a warp or a block per row, a transposed one (W.t(),
// rows interleaved in memory) and the columns of a row-major one a thread per row, reading
// coalesced. Sums accumulate in double, as on the CPU; each element is read and written by one
// thread, after its row's reduction, so dx may be grad itself (where grad's rows do not overlap).
#include <optional>

#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/cuda/rows.cuh"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

// max(n, eps), NaN staying NaN (the clamp's maximum).
template <class T>
__device__ __forceinline__ T clamped(T n, T eps) {
  return n < eps ? eps : n;
}

// Element i of row r at r * row + i * step: the rows of a normalisation's y, grad and dx (rows
// contiguous: (D, 1); columns of a row-major matrix, rows ld apart: (1, ld)).
struct RowStrides {
  int64_t row, step;
  __device__ int64_t at(int64_t r, int64_t i) const { return r * row + i * step; }
};

// Row r of l (the layout x is read in) for the offset `at` of one of its elements.
__device__ __forceinline__ int64_t row_of(const RowLayout& l, int64_t at) {
  return at / (l.n * l.inner) * l.inner + at % l.inner;
}

// x (rows of l) -> y (rows at ys), norms (rows): y_r = x_r / max(n_r, eps), n_r = ||x_r||.
template <class T>
struct NormalizeForward {
  using State = double;
  static constexpr bool kWrites = true;
  const T* x;
  T* y;
  T* norms;
  T eps;
  RowLayout l;
  RowStrides ys;
  __device__ State identity() const { return 0; }
  __device__ State update(State s, int64_t at, int64_t) const { return s + double(T(x[at] * x[at])); }
  static __device__ State combine(State a, State b) { return a + b; }
  __device__ void write(const State& s, int64_t at, int64_t i) const {
    y[ys.at(row_of(l, at), i)] = x[at] / clamped(sqrt_of(T(s)), eps);
  }
  __device__ void finish(const State& s, int64_t row) const { norms[row] = sqrt_of(T(s)); }
};

// grad, y (rows at gs, ys), norms (rows) -> dx (rows at ds): grad / d + c y, d = max(n, eps),
// c = -sum(grad / d * y) where n >= eps, else 0. l: the rows' layout as the launch walks them.
template <class T>
struct NormalizeBackward {
  using State = double;
  static constexpr bool kWrites = true;
  const T* grad;
  const T* y;
  const T* norms;
  T* dx;
  T eps;
  RowLayout l;
  RowStrides gs, ys, ds;
  __device__ T denom(int64_t r) const { return clamped(norms[r], eps); }
  __device__ State identity() const { return 0; }
  __device__ State update(State s, int64_t at, int64_t i) const {
    const int64_t r = row_of(l, at);
    return s + double(T(T(grad[gs.at(r, i)] / denom(r)) * y[ys.at(r, i)]));
  }
  static __device__ State combine(State a, State b) { return a + b; }
  __device__ void write(const State& s, int64_t at, int64_t i) const {
    const int64_t r = row_of(l, at);
    const T c = norms[r] >= eps ? T(-T(s)) : T(0);
    dx[ds.at(r, i)] = T(grad[gs.at(r, i)] / denom(r)) + T(c * y[ys.at(r, i)]);
  }
  __device__ void finish(const State&, int64_t) const {}
};

// x's rows as a RowLayout: (R, 1, ...) row-major, or transposed (strides (1, R)); undefined else.
std::optional<RowLayout> row_layout(const Tensor& x) {
  const int64_t R = x.size(0), D = x.size(1);
  if (x.is_contiguous()) return RowLayout{R, D, 1};
  if (x.stride(0) == 1 && x.stride(1) == R) return RowLayout{1, D, R};
  return std::nullopt;
}

void normalize_rows_forward_cuda(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  const std::optional<RowLayout> layout = row_layout(x);
  if (!layout) return normalize_rows_forward_cuda(x.contiguous(), eps, y, norms);  // other strides: rare
  dispatch_float(x.dtype(), "normalize_rows", [&]<class T>(TypeTag<T>) {
    const NormalizeForward<T> op{x.data<T>(), y.data<T>(), norms.data<T>(), T(eps), *layout, {x.size(1), 1}};
    launch_rows(op, *layout, {});
  });
}

void normalize_rows_backward_cuda(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                                  const Tensor& dx) {
  dispatch_float(y.dtype(), "normalize_rows_backward", [&]<class T>(TypeTag<T>) {
    const RowLayout rows{y.size(0), y.size(1), 1};
    const RowStrides contiguous{y.size(1), 1};
    launch_rows(NormalizeBackward<T>{grad.data<T>(), y.data<T>(), norms.data<T>(), dx.data<T>(), T(eps), rows,
                                     contiguous, contiguous, contiguous},
                rows, {});
  });
}

// Columns: x (R, C) contiguous is C rows of R values interleaved, a thread per column reading
// coalesced (Note [Row mappings] in rows.cuh); y, grad and dx are columns of their own row strides.
void normalize_columns_forward_cuda(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  dispatch_float(x.dtype(), "normalize_columns", [&]<class T>(TypeTag<T>) {
    const RowLayout columns{1, x.size(0), x.size(1)};
    launch_rows(NormalizeForward<T>{x.data<T>(), y.data<T>(), norms.data<T>(), T(eps), columns, {1, y.stride(0)}},
                columns, {});
  });
}

void normalize_columns_backward_cuda(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                                     const Tensor& dx) {
  dispatch_float(y.dtype(), "normalize_columns_backward", [&]<class T>(TypeTag<T>) {
    const RowLayout columns{1, y.size(0), y.size(1)};
    launch_rows(NormalizeBackward<T>{grad.data<T>(), y.data<T>(), norms.data<T>(), dx.data<T>(), T(eps), columns,
                                     {1, grad.stride(0)}, {1, y.stride(0)}, {1, dx.stride(0)}},
                columns, {});
  });
}

}  // namespace

void bind_normalize_kernels() {
  ember::normalize_rows_forward_kernel.set_cuda(&normalize_rows_forward_cuda);
  ember::normalize_rows_backward_kernel.set_cuda(&normalize_rows_backward_cuda);
  ember::normalize_columns_forward_kernel.set_cuda(&normalize_columns_forward_cuda);
  ember::normalize_columns_backward_kernel.set_cuda(&normalize_columns_backward_cuda);
}

}  // namespace ember::cuda
