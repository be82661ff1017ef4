// Row L2 normalisation on CUDA (contract in ops/kernels.h, the formulas in Note [Fused row
// normalisation] in ops/normalize.cpp, the CPU reference in ops/cpu/normalize.cpp), as row
// operations of rows.cuh: a row-major x takes a warp or a block per row, a transposed one
// (ArcFace's W.t(), rows interleaved in memory) a thread per row, reading coalesced. Sums
// accumulate in double, as on the CPU; each element is read and written by one thread, after
// its row's reduction, so dx may be grad itself.
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

// x (rows of l) -> y (R, D) contiguous, norms (R): y_r = x_r / max(n_r, eps), n_r = ||x_r||.
template <class T>
struct NormalizeForward {
  using State = double;
  static constexpr bool kWrites = true;
  const T* x;
  T* y;
  T* norms;
  T eps;
  RowLayout l;
  __device__ State identity() const { return 0; }
  __device__ State update(State s, int64_t at, int64_t) const { return s + double(T(x[at] * x[at])); }
  static __device__ State combine(State a, State b) { return a + b; }
  __device__ int64_t row_of(int64_t at) const { return at / (l.n * l.inner) * l.inner + at % l.inner; }
  __device__ void write(const State& s, int64_t at, int64_t i) const {
    y[row_of(at) * l.n + i] = x[at] / clamped(sqrt_of(T(s)), eps);
  }
  __device__ void finish(const State& s, int64_t row) const { norms[row] = sqrt_of(T(s)); }
};

// grad, y (R, D) contiguous, norms (R) -> dx (R, D): grad / d + c y, d = max(n, eps),
// c = -sum(grad / d * y) where n >= eps, else 0.
template <class T>
struct NormalizeBackward {
  using State = double;
  static constexpr bool kWrites = true;
  const T* grad;
  const T* y;
  const T* norms;
  T* dx;
  T eps;
  int64_t D;
  __device__ T denom(int64_t at) const { return clamped(norms[at / D], eps); }
  __device__ State identity() const { return 0; }
  __device__ State update(State s, int64_t at, int64_t) const { return s + double(T(T(grad[at] / denom(at)) * y[at])); }
  static __device__ State combine(State a, State b) { return a + b; }
  __device__ void write(const State& s, int64_t at, int64_t) const {
    const T c = norms[at / D] >= eps ? T(-T(s)) : T(0);
    dx[at] = T(grad[at] / denom(at)) + T(c * y[at]);
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
    launch_rows(NormalizeForward<T>{x.data<T>(), y.data<T>(), norms.data<T>(), T(eps), *layout}, *layout, {});
  });
}

void normalize_rows_backward_cuda(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                                  const Tensor& dx) {
  dispatch_float(y.dtype(), "normalize_rows_backward", [&]<class T>(TypeTag<T>) {
    launch_rows(NormalizeBackward<T>{grad.data<T>(), y.data<T>(), norms.data<T>(), dx.data<T>(), T(eps), y.size(1)},
                RowLayout{y.size(0), y.size(1), 1}, {});
  });
}

}  // namespace

void bind_normalize_kernels() {
  ember::normalize_rows_forward_kernel.set_cuda(&normalize_rows_forward_cuda);
  ember::normalize_rows_backward_kernel.set_cuda(&normalize_rows_backward_cuda);
}

}  // namespace ember::cuda
