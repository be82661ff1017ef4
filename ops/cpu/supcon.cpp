// SupCon on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// (Note [Self-similarity passes] in ops/cpu/self_similarity_passes.h):
//   forward   one pass of similarity tiles folds each anchor's lse_i over every j != i, a tile
//             row at a time (Note [Vectorised tile rows]), and its positive count P_i and the sum
//             S_i of its positives' s_ij / t from the few columns of its class (ClassMembers); the
//             anchor losses follow from those three, then AvgNonZeroReducer's mean, in row order;
//   backward  one pass of tiles turns s_ij into dloss/ds_ij + dloss/ds_ji (supcon_weight of
//             anchor i and of anchor j) and accumulates de_i += that weight * e_j with the GEMM.
//             supcon_weight is a_i exp(s / t - lse_i) - [j positive] b_i with a_i = P_i / (P_i +
//             small) and b_i = 1 / (P_i + small) for a kept anchor; a dropped one gets a_i = b_i = 0
//             and lse_i = +inf, so that its exp is 0 rather than 0 * inf.
#include <cmath>
#include <limits>

#include "ops/cpu/class_members.h"
#include "ops/cpu/self_similarity_passes.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                   const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& anchors) {
  const int64_t B = e.size(0), D = e.size(1);
  const int64_t* y = labels.data<int64_t>();
  double* st = stats.data<double>();  // (B, 3): [lse_i, P_i, loss_i]
  const double inv_t = 1.0 / temperature, small = small_val<T>();
  // While streaming, per anchor: the running (max, sum) of lse_i, P_i and S_i.
  const Tensor running = Tensor::empty({B, 4}, {.dtype = DType::f64});
  double* run = running.data<double>();
  for (int64_t i = 0; i < B; ++i) run[4 * i] = -INFINITY, run[4 * i + 1] = 0, run[4 * i + 2] = 0, run[4 * i + 3] = 0;

  const ClassMembers members(y, B);
  // s_ij / t lies in [-1 / t, 1 / t] (Note [Bounded log-sum-exp]).
  const std::optional<T> bound = log_sum_exp_bound<T>(-inv_t, inv_t);
  auto fold = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* S, T* scratch) {
    const T t_inv = T(inv_t);
    for (int64_t i = r0; i < r1; ++i) {
      double* r = run + 4 * i;
      OnlineLogSumExp lse{r[0], r[1]};
      const T* s = S + (i - r0) * (c1 - c0);
      const int64_t self = i - c0;  // the diagonal's column, when in this tile
      fold_log_sum_exp_under<T>(
          bound, lse, c1 - c0, scratch, [=](int64_t k) { return s[k] * t_inv; },
          [=](int64_t k) { return k != self; });
      for (const int64_t j : members.in_columns(i, c0, c1))  // the positives: P_i and S_i
        if (j != i) r[2] += 1, r[3] += double(s[j - c0]) * inv_t;
      r[0] = lse.max, r[1] = lse.sum;
    }
  };
  for_each_similarity_tile<T>(tiles, e.data<T>(), B, D, e.dtype(), fold);

  double total = 0, kept = 0, positives = 0;
  bool any_negative = false;
  for (int64_t i = 0; i < B; ++i) {
    const double* r = run + 4 * i;
    const double lse = OnlineLogSumExp{r[0], r[1]}.value(), P = r[2];
    const double loss_i = supcon_anchor_loss(P, lse, r[3], small);
    st[3 * i] = lse, st[3 * i + 1] = P, st[3 * i + 2] = loss_i;
    if (loss_i > 0) total += loss_i, kept += 1;
    positives += P;
    any_negative |= P < double(B - 1);
  }
  const bool defined = positives > 0 && any_negative && kept > 0;
  loss.data<T>()[0] = defined ? T(total / kept) : poison.data<T>()[0];  // Note [Non-finite embeddings]
  anchors.data<double>()[0] = defined ? kept : 0;
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                    double temperature, const Tensor& stats, const Tensor& anchors, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  T* dE = de.data<T>();
  const double N = anchors.data<double>()[0];
  if (N == 0) {
    std::fill(dE, dE + B * D, T(0));
    return;
  }
  const int64_t* y = labels.data<int64_t>();
  const double* st = stats.data<double>();
  const double inv_t = 1.0 / temperature, small = small_val<T>();
  const double scale = double(grad.data<T>()[0]) * inv_t / N;
  // Per anchor, scaled: -lse_i, scale a_i and scale b_i (supcon_weight's terms, above).
  const Tensor terms = Tensor::empty({3, B}, {.dtype = e.dtype()});
  T* neg_lse = terms.data<T>();
  T* a = neg_lse + B;
  T* b = a + B;
  for (int64_t i = 0; i < B; ++i) {
    const double* anchor = st + 3 * i;
    const bool kept = anchor[2] > 0;
    neg_lse[i] = kept ? T(-anchor[0]) : -std::numeric_limits<T>::infinity();
    a[i] = kept ? T(scale * anchor[1] / (anchor[1] + small)) : T(0);
    b[i] = kept ? T(scale / (anchor[1] + small)) : T(0);
  }
  const T t_inv = T(inv_t);
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, const T* s, T* w) {
    const int64_t* yc = y + c0;
    const T *lj = neg_lse + c0, *aj = a + c0, *bj = b + c0;
    const T li = neg_lse[i], ai = a[i], bi = b[i], t = t_inv;  // locals: not reloaded per pair
    const int64_t yi = y[i];
    for (int64_t k = 0; k < c1 - c0; ++k) {
      const T minus = yc[k] == yi ? bi + bj[k] : T(0);
      w[k] = ai * fast_exp(std::fma(s[k], t, li)) + aj[k] * fast_exp(std::fma(s[k], t, lj[k])) - minus;
    }
  };
  accumulate_similarity_gradient<T>(tiles, e.data<T>(), B, D, e.dtype(), dE, row_weights);
}

}  // namespace

void supcon_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                    const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& anchors) {
  dispatch_float(e.dtype(), "supcon_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, temperature, poison, stats, loss, anchors);
  });
}

void supcon_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                     double temperature, const Tensor& stats, const Tensor& anchors, const Tensor& de) {
  dispatch_float(e.dtype(), "supcon_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, temperature, stats, anchors, de);
  });
}

}  // namespace ember::cpu
