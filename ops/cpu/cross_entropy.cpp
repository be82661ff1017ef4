// Fused cross-entropy (log-softmax + NLL per row) and NLL kernels over (N, C, S) logits.
// Row (n, s) holds the C classes at stride S. Note [No one-hot]: the gradient is written
// straight from the row's saved log-sum-exp, softmax_c - (1 - smoothing) [c == t] - smoothing / C,
// so neither a one-hot target nor a softmax tensor is ever materialised.
// Note [f64 lse]: the log-sum-exp is kept in double even for f32 logits. Rounded to f32 next
// to a logit of 1e4 it would be off by up to 5e-4, and exp(x - lse) in the backward by as
// much relatively. The backward splits it into an f32 pair hi + lo (hi = f32(lse)), so its
// inner loop stays in f32: x - hi is exact for the logits that matter (those near lse).
// The loss is formed from non-negative pieces, (1 - s)(max - x_t) + (s / C) sum(max - x_c) +
// log(sum exp(x - max)), for the same reason.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

struct Rows {
  int64_t N, C, S;
  int64_t count() const { return N * S; }
  int64_t base(int64_t r) const { return (r / S) * C * S + r % S; }  // offset of (n, 0, s)
};

// Validates every target (Note [Class targets]) and counts those not ignored.
int64_t count_targets(const int64_t* t, const Rows& rows, int64_t ignore_index, const char* op) {
  int64_t valid = 0;
  for (int64_t r = 0; r < rows.count(); ++r) {
    if (t[r] == ignore_index) continue;
    EMBER_CHECK(t[r] >= 0 && t[r] < rows.C, op, ": target ", t[r], " is out of range for ", rows.C,
                " classes (expected 0 <= target < ", rows.C, ", or ignore_index ", ignore_index, ")");
    ++valid;
  }
  return valid;
}

// totals = [sum of the row losses, rows counted, their ratio]; the sum runs in row order, so
// the result does not depend on the thread count.
template <class T>
void write_totals(const T* loss, int64_t rows, int64_t counted, const Tensor& totals) {
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) sum += double(loss[r]);
  T* out = totals.data<T>();
  out[0] = T(sum);
  out[1] = T(counted);
  out[2] = T(sum / double(counted));  // 0 / 0 = NaN when every row is ignored, as in PyTorch
}

// Calls f(r) for every row in parallel.
template <class F>
void for_each_row(const Rows& rows, F f) {
  parallel_for(0, rows.count(), std::max<int64_t>(1, 16384 / std::max<int64_t>(rows.C, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) f(r);
               });
}

// One row's max, log(sum_c exp(x_c - max)) and (only when smoothing) sum_c (max - x_c);
// kStride 1 lets unit-stride rows vectorise.
template <class T>
struct RowStats {
  T max;
  double log_sum;
  double below_max;
  double lse() const { return double(max) + log_sum; }
};

template <class T, int64_t kStride>
RowStats<T> row_stats(const T* x, int64_t C, int64_t stride, bool smoothing) {
  const int64_t st = kStride > 0 ? kStride : stride;
  const T m = lane_max<T>(C, [&](int64_t c) { return x[c * st]; });
  const double s = lane_sum(C, [&](int64_t c) { return fast_exp(x[c * st] - m); });
  const double below = smoothing ? lane_sum(C, [&](int64_t c) { return m - x[c * st]; }) : 0.0;
  return {m, std::log(s), below};
}

template <class T, int64_t kStride>
void row_grad(const T* x, T* dx, int64_t C, int64_t stride, double lse, T g, int64_t t, T on_target, T uniform) {
  const int64_t st = kStride > 0 ? kStride : stride;
  const T hi = T(lse), lo = T(lse - double(hi));
  for (int64_t c = 0; c < C; ++c) dx[c * st] = g * (fast_exp((x[c * st] - hi) - lo) - uniform);
  dx[t * st] -= g * on_target;
}

template <class T>
T grad_at(const Tensor& grad, const Rows& rows, int64_t r) {
  return grad.data<T>()[(r / rows.S) * grad.stride(0) + (r % rows.S) * grad.stride(1)];
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                           const Tensor& losses, const Tensor& lse, const Tensor& totals) {
  dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>(TypeTag<T>) {
    const Rows rows{logits.size(0), logits.size(1), logits.size(2)};
    const int64_t* t = target.data<int64_t>();
    const int64_t counted = count_targets(t, rows, ignore_index, "cross_entropy");
    const T* x = logits.data<T>();
    T* loss = losses.data<T>();
    double* lsed = lse.data<double>();
    const double keep = 1 - smoothing, spread = smoothing / double(rows.C);
    for_each_row(rows, [&](int64_t r) {
      const T* row = x + rows.base(r);
      const RowStats<T> st = rows.S == 1 ? row_stats<T, 1>(row, rows.C, 1, smoothing > 0)
                                          : row_stats<T, 0>(row, rows.C, rows.S, smoothing > 0);
      lsed[r] = st.lse();
      if (t[r] == ignore_index) loss[r] = T(0);
      else loss[r] = T(keep * double(st.max - row[t[r] * rows.S]) + spread * st.below_max + st.log_sum);
    });
    write_totals(loss, rows.count(), counted, totals);
  });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                            double smoothing, int64_t ignore_index, const Tensor& dlogits) {
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&]<class T>(TypeTag<T>) {
    const Rows rows{logits.size(0), logits.size(1), logits.size(2)};
    const int64_t* t = target.data<int64_t>();
    const T* x = logits.data<T>();
    const double* lsed = lse.data<double>();
    T* dx = dlogits.data<T>();
    const T keep = T(1 - smoothing), spread = T(smoothing / double(rows.C));
    for_each_row(rows, [&](int64_t r) {
      const int64_t at = rows.base(r);
      if (t[r] == ignore_index) {
        for (int64_t c = 0; c < rows.C; ++c) dx[at + c * rows.S] = T(0);
        return;
      }
      const T g = grad_at<T>(grad, rows, r);
      if (rows.S == 1) row_grad<T, 1>(x + at, dx + at, rows.C, 1, lsed[r], g, t[r], keep, spread);
      else row_grad<T, 0>(x + at, dx + at, rows.C, rows.S, lsed[r], g, t[r], keep, spread);
    });
  });
}

void nll_loss_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& losses,
                      const Tensor& totals) {
  dispatch_float(log_probs.dtype(), "nll_loss", [&]<class T>(TypeTag<T>) {
    const Rows rows{log_probs.size(0), log_probs.size(1), log_probs.size(2)};
    const int64_t* t = target.data<int64_t>();
    const int64_t counted = count_targets(t, rows, ignore_index, "nll_loss");
    const T* lp = log_probs.data<T>();
    T* loss = losses.data<T>();
    for (int64_t r = 0; r < rows.count(); ++r)
      loss[r] = t[r] == ignore_index ? T(0) : -lp[rows.base(r) + t[r] * rows.S];
    write_totals(loss, rows.count(), counted, totals);
  });
}

void nll_loss_backward(const Tensor& grad, const Tensor& target, int64_t ignore_index, const Tensor& dlog_probs) {
  dispatch_float(dlog_probs.dtype(), "nll_loss_backward", [&]<class T>(TypeTag<T>) {
    const Rows rows{dlog_probs.size(0), dlog_probs.size(1), dlog_probs.size(2)};
    const int64_t* t = target.data<int64_t>();
    T* d = dlog_probs.data<T>();
    std::fill(d, d + dlog_probs.numel(), T(0));
    for (int64_t r = 0; r < rows.count(); ++r)
      if (t[r] != ignore_index) d[rows.base(r) + t[r] * rows.S] = -grad_at<T>(grad, rows, r);
  });
}

}  // namespace ember::cpu
