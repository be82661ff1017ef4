// Softmax and log-softmax over the middle dim of an (outer, n, inner) contiguous layout, as row
// operations of rows.cuh (one warp per short row, one block per long row, one thread per
// row when inner > 1). The forward finds max and sum in one pass (Note [Online softmax]) and
// writes in a second; log-softmax is (x - max) - log(sum), never x - (max + log(sum)), which
// would round away log(sum) next to a logit of 1e4 (Note [Softmax precision] on the CPU).
// Sums accumulate in the element type (the CPU uses double; rows here are reduced as a tree,
// whose error grows with log(n) rather than n).
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/cuda/rows.cuh"

namespace ember::cuda {
namespace {

// x -> y: softmax, or log-softmax when `log`.
template <class T>
struct SoftmaxForward {
  using State = OnlineMaxSum<T, T>;
  static constexpr bool kWrites = true;
  const T* x;
  T* y;
  bool log;
  __device__ State identity() const { return State::identity(); }
  __device__ State update(State s, int64_t at, int64_t) const {
    s.add(x[at]);
    return s;
  }
  static __device__ State combine(State a, State b) { return State::combine(a, b); }
  __device__ void write(const State& s, int64_t at, int64_t) const {
    if (log) y[at] = (x[at] - s.max) - log_of(s.sum);
    else y[at] = exp_of(T(x[at] - s.max)) * (T(1) / s.sum);
  }
  __device__ void finish(const State&, int64_t) const {}
};

// grad, y -> dx: softmax dx = y (g - sum(g y)); log-softmax dx = g - exp(y) sum(g).
template <class T>
struct SoftmaxBackward {
  using State = T;
  static constexpr bool kWrites = true;
  const T* grad;
  const T* y;
  T* dx;
  bool log;
  __device__ State identity() const { return T(0); }
  __device__ State update(State s, int64_t at, int64_t) const { return s + (log ? grad[at] : grad[at] * y[at]); }
  static __device__ State combine(State a, State b) { return a + b; }
  __device__ void write(const State& s, int64_t at, int64_t) const {
    dx[at] = log ? grad[at] - exp_of(y[at]) * s : y[at] * (grad[at] - s);
  }
  __device__ void finish(const State&, int64_t) const {}
};

template <class T>
void softmax_forward(int64_t outer, int64_t n, int64_t inner, const T* x, bool log, T* y, Stream stream) {
  launch_rows(SoftmaxForward<T>{x, y, log}, RowLayout{outer, n, inner}, stream);
}

template <class T>
void softmax_backward(int64_t outer, int64_t n, int64_t inner, const T* grad, const T* y, bool log, T* dx,
                      Stream stream) {
  launch_rows(SoftmaxBackward<T>{grad, y, dx, log}, RowLayout{outer, n, inner}, stream);
}

void softmax_forward_cuda(const Tensor& x, bool log, const Tensor& y) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>(TypeTag<T>) {
    softmax_forward<T>(x.size(0), x.size(1), x.size(2), x.data<T>(), log, y.data<T>(), {});
  });
}

void softmax_backward_cuda(const Tensor& grad, const Tensor& y, bool log, const Tensor& dx) {
  dispatch_float(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&]<class T>(TypeTag<T>) {
    softmax_backward<T>(y.size(0), y.size(1), y.size(2), grad.data<T>(), y.data<T>(), log, dx.data<T>(), {});
  });
}

}  // namespace

void bind_softmax_kernels() {
  ember::softmax_forward_kernel.set_cuda(&softmax_forward_cuda);
  ember::softmax_backward_kernel.set_cuda(&softmax_backward_cuda);
}

}  // namespace ember::cuda
