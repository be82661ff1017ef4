// Row L2 normalisation on the CPU (contract in ops/kernels.h, the formulas in Note [Fused row
// normalisation] in ops/normalize.cpp).
//
// Note [Row blocks, columns inner]: both passes walk a block of rows column by column: for
// column d, every row of the block. A row's sum then runs in column order whatever x's strides
// (the same bits for x and for a transposed copy of it), the block's sums are independent
// chains (no add waits on the one before), and a transposed x (ArcFace's W.t(), whose columns
// are contiguous) is read sequentially, a row-major one as kRowBlock sequential streams.
#include <algorithm>

#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kRowBlock = 16;

// fn(r, d) for the rows [r0, r1) (at most kRowBlock) and every column d < D, columns outer.
template <class Fn>
void for_each_in_block(int64_t r0, int64_t r1, int64_t D, Fn&& fn) {
  for (int64_t d = 0; d < D; ++d)
    for (int64_t r = r0; r < r1; ++r) fn(r, d);
}

// Runs block(r0, r1, sums) over the row blocks of R rows in parallel; sums: kRowBlock doubles,
// zeroed, indexed by r - r0.
template <class Block>
void for_each_row_block(int64_t R, int64_t D, Block&& block) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(D * kRowBlock, 1));
  parallel_for(0, (R + kRowBlock - 1) / kRowBlock, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double sums[kRowBlock] = {};
      block(b * kRowBlock, std::min(R, (b + 1) * kRowBlock), sums);
    }
  });
}

// max(n, eps), NaN staying NaN (the clamp's maximum).
template <class T>
T clamped(T n, T eps) {
  return n < eps ? eps : n;
}

template <class T>
void forward_typed(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  const int64_t D = x.size(1), s0 = x.stride(0), s1 = x.stride(1);
  const T* X = x.data<T>();
  T* Y = y.data<T>();
  T* N = norms.data<T>();
  const T e = T(eps);
  for_each_row_block(x.size(0), D, [&](int64_t r0, int64_t r1, double* sums) {
    for_each_in_block(r0, r1, D, [&](int64_t r, int64_t d) {
      const T v = X[r * s0 + d * s1];
      sums[r - r0] += double(T(v * v));
    });
    T denom[kRowBlock];
    for (int64_t r = r0; r < r1; ++r) {
      N[r] = std::sqrt(T(sums[r - r0]));
      denom[r - r0] = clamped(N[r], e);
    }
    for_each_in_block(r0, r1, D, [&](int64_t r, int64_t d) { Y[r * D + d] = X[r * s0 + d * s1] / denom[r - r0]; });
  });
}

template <class T>
void backward_typed(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps, const Tensor& dx) {
  const int64_t D = y.size(1);
  const T* G = grad.data<T>();
  const T* Y = y.data<T>();
  const T* N = norms.data<T>();
  T* DX = dx.data<T>();  // may be G: a row block is read whole before it is written
  const T e = T(eps);
  for_each_row_block(y.size(0), D, [&](int64_t r0, int64_t r1, double* sums) {
    T denom[kRowBlock], c[kRowBlock];
    for (int64_t r = r0; r < r1; ++r) denom[r - r0] = clamped(N[r], e);
    for_each_in_block(r0, r1, D, [&](int64_t r, int64_t d) {
      const T ga = G[r * D + d] / denom[r - r0];
      sums[r - r0] += double(T(ga * Y[r * D + d]));
    });
    for (int64_t r = r0; r < r1; ++r) c[r - r0] = N[r] >= e ? T(-T(sums[r - r0])) : T(0);
    for_each_in_block(r0, r1, D, [&](int64_t r, int64_t d) {
      const int64_t i = r * D + d;
      DX[i] = T(G[i] / denom[r - r0]) + T(c[r - r0] * Y[i]);
    });
  });
}

}  // namespace

void normalize_rows_forward(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  dispatch_float(x.dtype(), "normalize_rows", [&]<class T>(TypeTag<T>) { forward_typed<T>(x, eps, y, norms); });
}

void normalize_rows_backward(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                             const Tensor& dx) {
  dispatch_float(y.dtype(), "normalize_rows_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(grad, y, norms, eps, dx);
  });
}

}  // namespace ember::cpu
