// Row and column L2 normalisation on the CPU (contract in ops/kernels.h, the formulas in Note
// [Fused row normalisation] in ops/normalize.cpp), parallel over rows or blocks of columns, sums
// in double.
//
// Note [Normalisation loop order]: a row-contiguous x (the embeddings, ProxyAnchor's proxies)
// and every backward go a row at a time, its sum in partials and its writes one unit-stride
// loop, both vectorised. Any other x (ArcFace's W.t(), whose columns are contiguous) goes
// kRowBlock rows at a time, column by column: the reads stay sequential and each row's sum is
// an independent chain, so no add waits on the one before.
//
// Note [The composite's bits]: in f32 the op gives the bits of the composite it replaced
// (div(x, clamp(norm(x), eps)) and its autograd), so training runs are unchanged to the last
// bit (a DDP-vs-one-process test compares retrieval scores that a rounding-level change can
// move): sums add in the order of the reduction kernel's (row_sum below; a strided row
// sequentially), every product and quotient is rounded to T as its own op, and dx's sum
// ga + c y adds a stored product, so that -ffp-contract=fast cannot fuse it into an FMA.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kRowBlock = 16;
constexpr int64_t kChunk = 256;  // elements of a row per pass of the backward's last loop

// sum of f(i) for i < n in double, in the order of ops/cpu/reduce.cpp's unit-stride sum: eight
// partials over the whole octets, the tail first, then the partials (Note [The composite's bits]).
template <class F>
double row_sum(int64_t n, F&& f) {
  double part[8] = {}, acc = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += double(f(i + j));
  for (; i < n; ++i) acc += double(f(i));
  for (int j = 0; j < 8; ++j) acc += part[j];
  return acc;
}

// max(n, eps), NaN staying NaN (the clamp's maximum).
template <class T>
T clamped(T n, T eps) {
  return n < eps ? eps : n;
}

// Rows [r0, r1) of a row-contiguous x, one at a time.
template <class T>
void forward_rows(const T* X, int64_t s0, int64_t r0, int64_t r1, int64_t D, T eps, T* Y, T* N) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = X + r * s0;
    T* y = Y + r * D;
    N[r] = std::sqrt(T(row_sum(D, [&](int64_t d) { return T(x[d] * x[d]); })));
    const T denom = clamped(N[r], eps);
    for (int64_t d = 0; d < D; ++d) y[d] = x[d] / denom;
  }
}

// Rows [r0, r1) (at most kRowBlock) of any other x, column by column.
template <class T>
void forward_columns(const T* X, int64_t s0, int64_t s1, int64_t r0, int64_t r1, int64_t D, T eps, T* Y, T* N) {
  const int64_t n = r1 - r0;
  const T* x = X + r0 * s0;
  double sums[kRowBlock] = {};
  for (int64_t d = 0; d < D; ++d)
    for (int64_t k = 0; k < n; ++k) sums[k] += double(T(x[k * s0 + d * s1] * x[k * s0 + d * s1]));
  T denom[kRowBlock];
  for (int64_t k = 0; k < n; ++k) {
    N[r0 + k] = std::sqrt(T(sums[k]));
    denom[k] = clamped(N[r0 + k], eps);
  }
  T* y = Y + r0 * D;
  for (int64_t d = 0; d < D; ++d)
    for (int64_t k = 0; k < n; ++k) y[k * D + d] = x[k * s0 + d * s1] / denom[k];
}

template <class T>
void forward_typed(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  const int64_t R = x.size(0), D = x.size(1), s0 = x.stride(0), s1 = x.stride(1);
  const T* X = x.data<T>();
  const bool by_rows = s1 == 1;
  const int64_t blocks = by_rows ? R : (R + kRowBlock - 1) / kRowBlock, rows_per_block = by_rows ? 1 : kRowBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(D * rows_per_block, 1));
  parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * rows_per_block, r1 = std::min(R, b1 * rows_per_block);
    if (by_rows) return forward_rows(X, s0, r0, r1, D, T(eps), y.data<T>(), norms.data<T>());
    for (int64_t r = r0; r < r1; r += kRowBlock)
      forward_columns(X, s0, s1, r, std::min(r1, r + kRowBlock), D, T(eps), y.data<T>(), norms.data<T>());
  });
}

template <class T>
void backward_typed(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps, const Tensor& dx) {
  const int64_t D = y.size(1);
  const T* G = grad.data<T>();
  const T* Y = y.data<T>();
  const T* N = norms.data<T>();
  T* DX = dx.data<T>();  // may be G: each element is read before it is written
  const T e = T(eps);
  parallel_for(0, y.size(0), std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* g = G + r * D;
      const T* yr = Y + r * D;
      const T denom = clamped(N[r], e);
      const double s = row_sum(D, [&](int64_t d) { return T(T(g[d] / denom) * yr[d]); });
      const T c = N[r] >= e ? T(-T(s)) : T(0);
      T* out = DX + r * D;
      T product[kChunk];  // c y, stored: Note [The composite's bits]
      for (int64_t d0 = 0; d0 < D; d0 += kChunk) {
        const int64_t n = std::min(kChunk, D - d0);
        for (int64_t k = 0; k < n; ++k) product[k] = c * yr[d0 + k];
        for (int64_t k = 0; k < n; ++k) out[d0 + k] = T(g[d0 + k] / denom) + product[k];
      }
    }
  });
}

// ---- columns --------------------------------------------------------------------------------
// Note [Column blocks]: normalize_columns(W) goes kColumnBlock columns at a time, a row of the
// block per step: each column's sum is its own chain, down its rows in order (the bits of
// forward_columns on W.t(), Note [The composite's bits]), and the inner loop runs across the
// block's columns, unit stride and vectorised.
constexpr int64_t kColumnBlock = 64;

// Columns [c0, c1) (at most kColumnBlock) of x (R, C) contiguous into y (row stride ldy).
template <class T>
void forward_column_block(const T* X, int64_t R, int64_t C, int64_t c0, int64_t c1, T eps, T* Y, int64_t ldy, T* N) {
  const int64_t n = c1 - c0;
  double sums[kColumnBlock] = {};
  for (int64_t r = 0; r < R; ++r) {
    const T* x = X + r * C + c0;
    for (int64_t k = 0; k < n; ++k) sums[k] += double(T(x[k] * x[k]));
  }
  T denom[kColumnBlock];
  for (int64_t k = 0; k < n; ++k) {
    N[c0 + k] = std::sqrt(T(sums[k]));
    denom[k] = clamped(N[c0 + k], eps);
  }
  for (int64_t r = 0; r < R; ++r) {
    const T* x = X + r * C + c0;
    T* y = Y + r * ldy + c0;
    for (int64_t k = 0; k < n; ++k) y[k] = x[k] / denom[k];
  }
}

// Columns [c0, c1) of dx from grad and y (row strides ldd, ldg, ldy; DX may be G: each element is
// read before it is written).
template <class T>
void backward_column_block(const T* G, int64_t ldg, const T* Y, int64_t ldy, const T* N, int64_t R, int64_t c0,
                           int64_t c1, T eps, T* DX, int64_t ldd) {
  const int64_t n = c1 - c0;
  T denom[kColumnBlock], c[kColumnBlock], product[kColumnBlock];
  double sums[kColumnBlock] = {};
  for (int64_t k = 0; k < n; ++k) denom[k] = clamped(N[c0 + k], eps);
  for (int64_t r = 0; r < R; ++r) {
    const T* g = G + r * ldg + c0;
    const T* y = Y + r * ldy + c0;
    for (int64_t k = 0; k < n; ++k) sums[k] += double(T(T(g[k] / denom[k]) * y[k]));
  }
  for (int64_t k = 0; k < n; ++k) c[k] = N[c0 + k] >= eps ? T(-T(sums[k])) : T(0);
  for (int64_t r = 0; r < R; ++r) {
    const T* g = G + r * ldg + c0;
    const T* y = Y + r * ldy + c0;
    T* dx = DX + r * ldd + c0;
    for (int64_t k = 0; k < n; ++k) product[k] = c[k] * y[k];  // stored: Note [The composite's bits]
    for (int64_t k = 0; k < n; ++k) dx[k] = T(g[k] / denom[k]) + product[k];
  }
}

template <class T>
void forward_columns_typed(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  const int64_t R = x.size(0), C = x.size(1), blocks = (C + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(R * kColumnBlock, 1));
  parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      forward_column_block(x.data<T>(), R, C, b * kColumnBlock, std::min(C, (b + 1) * kColumnBlock), T(eps),
                           y.data<T>(), y.stride(0), norms.data<T>());
  });
}

template <class T>
void backward_columns_typed(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps, const Tensor& dx) {
  const int64_t R = y.size(0), C = y.size(1), blocks = (C + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(R * kColumnBlock, 1));
  parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      backward_column_block(grad.data<T>(), grad.stride(0), y.data<T>(), y.stride(0), norms.data<T>(), R,
                            b * kColumnBlock, std::min(C, (b + 1) * kColumnBlock), T(eps), dx.data<T>(), dx.stride(0));
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

void normalize_columns_forward(const Tensor& x, double eps, const Tensor& y, const Tensor& norms) {
  dispatch_float(x.dtype(), "normalize_columns", [&]<class T>(TypeTag<T>) {
    forward_columns_typed<T>(x, eps, y, norms);
  });
}

void normalize_columns_backward(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                                const Tensor& dx) {
  dispatch_float(y.dtype(), "normalize_columns_backward", [&]<class T>(TypeTag<T>) {
    backward_columns_typed<T>(grad, y, norms, eps, dx);
  });
}

}  // namespace ember::cpu
