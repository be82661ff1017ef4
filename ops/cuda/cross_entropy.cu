// Fused cross-entropy (log-softmax + NLL per row) and NLL on CUDA, over (N, C, S) logits whose
// row (n, s) holds the C classes at stride S: the row layout (outer N, n C, inner S) of
// rows.cuh. Contracts and numerics follow ops/cpu/cross_entropy.cpp: the log-sum-exp is kept
// in double (Note [f64 lse]) and the backward splits it into an f32 pair hi + lo; the loss is
// formed from non-negative pieces (1 - s)(max - x_t) + (s / C) sum(max - x_c) + log(sum); the
// gradient is written straight from the saved lse (Note [No one-hot]).
//
// Note [Totals kernel]: a single block sums the row losses in double (a fixed tree, so the
// result is deterministic), counts the rows not ignored and writes [sum, count, sum / count].
// It also finds the first row whose target is out of range.
//
// Note [Target check]: a target outside [0, C) that is not ignore_index cannot be thrown from a
// kernel. Its row's loss is NaN and never reads the logits; the totals kernel writes {row,
// value} of the first such row (or {-1, 0}) into a 2-element device buffer, which the Tensor
// adapter reads back after the forward to throw the CPU's error. That readback is one small
// device-to-host copy per loss forward: the caller reads the loss for display anyway. The
// backward trusts the targets its forward validated.
#include <climits>

#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"
#include "ops/cuda/rows.cuh"

namespace ember::cuda {
namespace {


constexpr unsigned kThreads = 256;

__device__ __forceinline__ bool in_range(int64_t t, int64_t C) { return t >= 0 && t < C; }

template <class T>
struct CrossEntropyState {
  OnlineMaxSum<T, double> ms;
  double sum_x;  // sum_c x_c, for the smoothing term C max - sum_c x_c = sum_c (max - x_c)
};

template <class T>
__device__ __forceinline__ CrossEntropyState<T> shuffle_xor(CrossEntropyState<T> v, int lane_mask) {
  return {shuffle_xor(v.ms, lane_mask), __shfl_xor_sync(kFullWarp, v.sum_x, lane_mask)};
}

// logits, target -> losses (rows), lse (rows, f64).
template <class T>
struct CrossEntropyForward {
  using State = CrossEntropyState<T>;
  static constexpr bool kWrites = false;
  const T* x;
  const int64_t* target;
  int64_t C, S, ignore_index;
  double keep, spread;
  T* losses;
  double* lse;
  __device__ State identity() const { return {OnlineMaxSum<T, double>::identity(), 0.0}; }
  __device__ State update(State s, int64_t at, int64_t) const {
    s.ms.add(x[at]);
    s.sum_x += double(x[at]);
    return s;
  }
  static __device__ State combine(State a, State b) {
    return {OnlineMaxSum<T, double>::combine(a.ms, b.ms), a.sum_x + b.sum_x};
  }
  __device__ void write(const State&, int64_t, int64_t) const {}
  __device__ void finish(const State& s, int64_t row) const {
    const double log_sum = log(s.ms.sum), m = double(s.ms.max);
    lse[row] = m + log_sum;
    const int64_t t = target[row];
    if (t == ignore_index) {
      losses[row] = T(0);
    } else if (!in_range(t, C)) {
      losses[row] = T(NAN);  // reported by the totals kernel (Note [Target check])
    } else {
      const T x_t = x[row / S * C * S + row % S + t * S];
      const double below_max = spread > 0 ? double(C) * m - s.sum_x : 0.0;
      losses[row] = T(keep * double(s.ms.max - x_t) + spread * below_max + log_sum);
    }
  }
};

// log_probs, target -> losses: one thread per row.
template <class T>
__global__ void nll_forward_kernel(int64_t rows, int64_t C, int64_t S, const T* __restrict__ lp,
                                   const int64_t* __restrict__ target, int64_t ignore_index, T* __restrict__ losses) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(blockDim.x) * gridDim.x) {
    const int64_t t = target[r];
    losses[r] = t == ignore_index ? T(0) : in_range(t, C) ? -lp[r / S * C * S + r % S + t * S] : T(NAN);
  }
}

struct MinOf {
  __device__ long long operator()(long long a, long long b) const { return a < b ? a : b; }
};

// Note [Totals kernel], Note [Target check]. One block.
template <class T>
__global__ void totals_kernel(int64_t rows, int64_t C, const int64_t* __restrict__ target, int64_t ignore_index,
                              const T* __restrict__ losses, T* __restrict__ totals, int64_t* __restrict__ check) {
  __shared__ double sums[32];
  __shared__ long long counts[32];
  double sum = 0;
  long long counted = 0, first_bad = LLONG_MAX;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t t = target[r];
    if (t == ignore_index) continue;
    if (!in_range(t, C)) {
      first_bad = first_bad < r ? first_bad : r;
      continue;
    }
    sum += double(losses[r]);
    ++counted;
  }
  sum = block_reduce(sum, sums, Sum{});
  counted = block_reduce(counted, counts, Sum{});
  first_bad = block_reduce(first_bad, counts, MinOf{});
  if (threadIdx.x != 0) return;
  totals[0] = T(sum);
  totals[1] = T(counted);
  totals[2] = T(sum / double(counted));  // 0 / 0 = NaN when every row is ignored, as in PyTorch
  check[0] = first_bad == LLONG_MAX ? -1 : first_bad;
  check[1] = first_bad == LLONG_MAX ? 0 : target[first_bad];
}

// dlogits (N, C, S), one thread per element: grad * (exp(x - lse) - spread) - [c == t] grad * keep.
template <class T>
__global__ void cross_entropy_backward_kernel(int64_t N, int64_t C, int64_t S, const T* __restrict__ grad,
                                              int64_t gsn, int64_t gss, const T* __restrict__ x,
                                              const int64_t* __restrict__ target, const double* __restrict__ lse,
                                              T keep, T spread, int64_t ignore_index, T* __restrict__ dx) {
  const int64_t total = N * C * S;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t s = i % S, c = i / S % C, n = i / (S * C), r = n * S + s, t = target[r];
    if (t == ignore_index) {
      dx[i] = T(0);
      continue;
    }
    const T g = grad[n * gsn + s * gss];
    const T hi = T(lse[r]), lo = T(lse[r] - double(hi));
    T d = g * (exp_of(T((x[i] - hi) - lo)) - spread);
    if (c == t) d -= g * keep;
    dx[i] = d;
  }
}

// dlog_probs (N, C, S): -grad at the target, 0 elsewhere.
template <class T>
__global__ void nll_backward_kernel(int64_t N, int64_t C, int64_t S, const T* __restrict__ grad, int64_t gsn,
                                    int64_t gss, const int64_t* __restrict__ target, int64_t ignore_index,
                                    T* __restrict__ dx) {
  const int64_t total = N * C * S;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t s = i % S, c = i / S % C, n = i / (S * C), t = target[n * S + s];
    dx[i] = t != ignore_index && c == t ? -grad[n * gsn + s * gss] : T(0);
  }
}

template <class T>
void totals(int64_t rows, int64_t C, const int64_t* target, int64_t ignore_index, const T* losses, T* out,
            int64_t* check, Stream stream) {
  launch<totals_kernel<T>>(1, kThreads, 0, stream, rows, C, target, ignore_index, losses, out, check);
}

template <class T>
void cross_entropy_forward(int64_t N, int64_t C, int64_t S, const T* logits, const int64_t* target, double smoothing,
                           int64_t ignore_index, T* losses, double* lse, T* totals_out, int64_t* check,
                           Stream stream) {
  const CrossEntropyForward<T> op{logits, target, C, S, ignore_index, 1 - smoothing, smoothing / double(C), losses, lse};
  launch_rows(op, RowLayout{N, C, S}, stream);
  totals(N * S, C, target, ignore_index, (const T*)losses, totals_out, check, stream);
}

template <class T>
void cross_entropy_backward(int64_t N, int64_t C, int64_t S, const T* grad, int64_t grad_stride_n,
                            int64_t grad_stride_s, const T* logits, const int64_t* target, const double* lse,
                            double smoothing, int64_t ignore_index, T* dlogits, Stream stream) {
  const int64_t total = N * C * S;
  if (total == 0) return;
  launch<cross_entropy_backward_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, N, C, S, grad,
                                           grad_stride_n, grad_stride_s, logits, target, lse, T(1 - smoothing),
                                           T(smoothing / double(C)), ignore_index, dlogits);
}

template <class T>
void nll_loss_forward(int64_t N, int64_t C, int64_t S, const T* log_probs, const int64_t* target, int64_t ignore_index,
                      T* losses, T* totals_out, int64_t* check, Stream stream) {
  const int64_t rows = N * S;
  if (rows > 0)
    launch<nll_forward_kernel<T>>(blocks_for(rows, kThreads), kThreads, 0, stream, rows, C, S, log_probs, target,
                                  ignore_index, losses);
  totals(rows, C, target, ignore_index, (const T*)losses, totals_out, check, stream);
}

template <class T>
void nll_loss_backward(int64_t N, int64_t C, int64_t S, const T* grad, int64_t grad_stride_n, int64_t grad_stride_s,
                       const int64_t* target, int64_t ignore_index, T* dlog_probs, Stream stream) {
  const int64_t total = N * C * S;
  if (total == 0) return;
  launch<nll_backward_kernel<T>>(blocks_for(total, kThreads), kThreads, 0, stream, N, C, S, grad, grad_stride_n,
                                 grad_stride_s, target, ignore_index, dlog_probs);
}

#define EMBER_INSTANTIATE_CROSS_ENTROPY(T)                                                                           \
  template void cross_entropy_forward<T>(int64_t, int64_t, int64_t, const T*, const int64_t*, double, int64_t, T*,   \
                                         double*, T*, int64_t*, Stream);                                             \
  template void cross_entropy_backward<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*,           \
                                          const int64_t*, const double*, double, int64_t, T*, Stream);               \
  template void nll_loss_forward<T>(int64_t, int64_t, int64_t, const T*, const int64_t*, int64_t, T*, T*, int64_t*,  \
                                    Stream);                                                                         \
  template void nll_loss_backward<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const int64_t*, int64_t, \
                                     T*, Stream);
EMBER_INSTANTIATE_CROSS_ENTROPY(float)
EMBER_INSTANTIATE_CROSS_ENTROPY(double)

// Reads back the forward's target check (Note [Target check] above) and throws the CPU kernel's
// error (Note [Class targets] in ops/kernels.h).
void throw_on_bad_target(const Tensor& check, int64_t C, int64_t ignore_index, const char* op) {
  int64_t host[2] = {0, 0};
  cuda::memcpy(host, check.raw_data(), sizeof(host), CopyKind::device_to_host);
  EMBER_CHECK(host[0] < 0, op, ": target ", host[1], " is out of range for ", C, " classes (expected 0 <= target < ",
              C, ", or ignore_index ", ignore_index, ")");
}

// Two device int64 for the target check.
Tensor target_check_buffer(const Tensor& like) { return Tensor::empty({2}, {.dtype = DType::i64, .device = like.device()}); }

void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                                const Tensor& losses, const Tensor& lse, const Tensor& totals) {
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>(TypeTag<T>) {
    const int64_t C = logits.size(1);
    const Tensor check = target_check_buffer(logits);
    cross_entropy_forward<T>(logits.size(0), C, logits.size(2), logits.data<T>(), target.data<int64_t>(), smoothing,
                             ignore_index, losses.data<T>(), lse.data<double>(), totals.data<T>(),
                             check.data<int64_t>(), {});
    throw_on_bad_target(check, C, ignore_index, "cross_entropy");
  });
}

void cross_entropy_backward_cuda(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                                 double smoothing, int64_t ignore_index, const Tensor& dlogits) {
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&]<class T>(TypeTag<T>) {
    cross_entropy_backward<T>(logits.size(0), logits.size(1), logits.size(2), grad.data<T>(), grad.stride(0),
                              grad.stride(1), logits.data<T>(), target.data<int64_t>(), lse.data<double>(), smoothing,
                              ignore_index, dlogits.data<T>(), {});
  });
}

void nll_loss_forward_cuda(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& losses,
                           const Tensor& totals) {
  dispatch_float(log_probs.dtype(), "nll_loss", [&]<class T>(TypeTag<T>) {
    const int64_t C = log_probs.size(1);
    const Tensor check = target_check_buffer(log_probs);
    nll_loss_forward<T>(log_probs.size(0), C, log_probs.size(2), log_probs.data<T>(), target.data<int64_t>(),
                        ignore_index, losses.data<T>(), totals.data<T>(), check.data<int64_t>(), {});
    throw_on_bad_target(check, C, ignore_index, "nll_loss");
  });
}

void nll_loss_backward_cuda(const Tensor& grad, const Tensor& target, int64_t ignore_index, const Tensor& dlog_probs) {
  dispatch_float(dlog_probs.dtype(), "nll_loss_backward", [&]<class T>(TypeTag<T>) {
    nll_loss_backward<T>(dlog_probs.size(0), dlog_probs.size(1), dlog_probs.size(2), grad.data<T>(), grad.stride(0),
                         grad.stride(1), target.data<int64_t>(), ignore_index, dlog_probs.data<T>(), {});
  });
}

}  // namespace

void bind_cross_entropy_kernels() {
  ember::cross_entropy_forward_kernel.set_cuda(&cross_entropy_forward_cuda);
  ember::cross_entropy_backward_kernel.set_cuda(&cross_entropy_backward_cuda);
  ember::nll_loss_forward_kernel.set_cuda(&nll_loss_forward_cuda);
  ember::nll_loss_backward_kernel.set_cuda(&nll_loss_backward_cuda);
}

}  // namespace ember::cuda
