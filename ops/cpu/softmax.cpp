// Softmax and log-softmax over the middle dim of an (outer, n, inner) contiguous view.
// Note [Two traversals]: with inner == 1 (softmax over the last dim) each row is n unit-stride
// values and the loops run along the row; otherwise the n values of one slice are `inner` apart,
// so the kernel takes a block of up to kLanes neighbouring slices at once and every loop runs
// along that unit-stride block. Both traversals share the per-element math below.
// Note [Softmax precision]: sums accumulate in double (the conversion vectorises; exp is the
// cost), and log-softmax is formed as (x - max) - log(sum), never x - (max + log(sum)), which
// would round away the small log(sum) next to a logit of 1e4 in f32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

constexpr int64_t kLanes = 64;  // slices handled together when inner > 1
// Elements per parallel chunk, as the other CPU kernels use. (It was 131072 while waking a pool
// thread cost as much as a 8x10x28x28 softmax backward; since the pool spins before sleeping,
// Note [Spin before sleeping] in core/parallel.cpp, two threads take that backward from 13 to
// 9 us and the forward from 42 to 24 us.)
constexpr int64_t kGrainElements = 32768;

// Calls f(offset, lanes) for every block of slices; offset is the element offset of (o, 0, j).
template <class F>
void for_each_block(int64_t outer, int64_t n, int64_t inner, F f) {
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) f(o * n, int64_t(1));
    });
    return;
  }
  const int64_t blocks_per_outer = (inner + kLanes - 1) / kLanes;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(n * kLanes, 1));
  parallel_for(0, outer * blocks_per_outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / blocks_per_outer, j = (k % blocks_per_outer) * kLanes;
      f(o * n * inner + j, std::min(kLanes, inner - j));
    }
  });
}

// Forward over one row (inner == 1): unit stride along n.
template <class T>
void softmax_row(const T* x, T* y, int64_t n, bool log) {
  const T m = lane_max<T>(n, [&](int64_t i) { return x[i]; });
  if (log) {
    const T log_s = T(std::log(lane_sum(n, [&](int64_t i) { return fast_exp(x[i] - m); })));
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i] - m);
    const T inv = T(1 / lane_sum(n, [&](int64_t i) { return y[i]; }));
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Forward over `lanes` neighbouring slices (inner > 1): x(i, l) = x[i * stride + l].
template <class T>
void softmax_lanes(const T* x, T* y, int64_t n, int64_t stride, int64_t lanes, bool log) {
  T m[kLanes], scale[kLanes];
  double s[kLanes];
  std::fill(m, m + lanes, -std::numeric_limits<T>::infinity());
  std::fill(s, s + lanes, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < lanes; ++l) m[l] = x[i * stride + l] > m[l] ? x[i * stride + l] : m[l];
  if (log) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) s[l] += fast_exp(x[i * stride + l] - m[l]);
    for (int64_t l = 0; l < lanes; ++l) scale[l] = T(std::log(s[l]));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) y[i * stride + l] = (x[i * stride + l] - m[l]) - scale[l];
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) {
        const T e = fast_exp(x[i * stride + l] - m[l]);
        y[i * stride + l] = e;
        s[l] += e;
      }
    for (int64_t l = 0; l < lanes; ++l) scale[l] = T(1 / s[l]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) y[i * stride + l] *= scale[l];
  }
}

// Backward: softmax dx = y * (g - sum(g * y)); log-softmax dx = g - exp(y) * sum(g).
template <class T>
void backward_row(const T* g, const T* y, T* dx, int64_t n, bool log) {
  if (log) {
    const T s = T(lane_sum(n, [&](int64_t i) { return g[i]; }));
    for (int64_t i = 0; i < n; ++i) dx[i] = g[i] - fast_exp(y[i]) * s;
  } else {
    const T s = T(lane_sum(n, [&](int64_t i) { return g[i] * y[i]; }));
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] * (g[i] - s);
  }
}

template <class T>
void backward_lanes(const T* g, const T* y, T* dx, int64_t n, int64_t stride, int64_t lanes, bool log) {
  double s[kLanes];
  std::fill(s, s + lanes, 0.0);
  if (log) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) s[l] += g[i * stride + l];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t at = i * stride + l;
        dx[at] = g[at] - fast_exp(y[at]) * T(s[l]);
      }
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) s[l] += g[i * stride + l] * y[i * stride + l];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t at = i * stride + l;
        dx[at] = y[at] * (g[at] - T(s[l]));
      }
  }
}

}  // namespace

void softmax_forward(const Tensor& x, bool log, const Tensor& y) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>(TypeTag<T>) {
    const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for_each_block(outer, n, inner, [&](int64_t at, int64_t lanes) {
      if (inner == 1) softmax_row(xd + at, yd + at, n, log);
      else softmax_lanes(xd + at, yd + at, n, inner, lanes, log);
    });
  });
}

void softmax_backward(const Tensor& grad, const Tensor& y, bool log, const Tensor& dx) {
  dispatch_float(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&]<class T>(TypeTag<T>) {
    const int64_t outer = y.size(0), n = y.size(1), inner = y.size(2);
    const T *gd = grad.data<T>(), *yd = y.data<T>();
    T* dxd = dx.data<T>();
    for_each_block(outer, n, inner, [&](int64_t at, int64_t lanes) {
      if (inner == 1) backward_row(gd + at, yd + at, dxd + at, n, log);
      else backward_lanes(gd + at, yd + at, dxd + at, n, inner, lanes, log);
    });
  });
}

}  // namespace ember::cpu
