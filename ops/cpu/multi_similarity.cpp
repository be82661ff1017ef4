// Multi-Similarity on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// (Note [Self-similarity passes] in ops/cpu/self_similarity_passes.h):
//   forward   one pass of similarity tiles folds each row's two log-sums, each started at exp(0)
//             (PML's add_one): ln_i over its negatives a tile row at a time (Note [Vectorised tile
//             rows]), lp_i over just its positives, the few columns of its class (ClassMembers,
//             fold_log_sum_exp_at); the mean of lp_i / alpha + ln_i / beta follows, in row order;
//   backward  one pass of tiles turns s_ij into dloss/ds_ij + dloss/ds_ji (ms_weight of row i
//             and of row j) and accumulates de_i += that weight * e_j with the GEMM.
// Both write a pair's exponent as a s + b, (a, b) = (-alpha, alpha base) for a positive pair and
// (beta, -beta base) for a negative one, so that ms_weight's exp(exponent - lp_i) is
// exp(a s + (b - lp_i)) with the offset b - lp_i per row, one FMA per pair.
#include <cmath>

#include "ops/cpu/class_members.h"
#include "ops/cpu/self_similarity_passes.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, const MultiSimilarityParams& p,
                   const Tensor& stats, const Tensor& loss) {
  const int64_t B = e.size(0), D = e.size(1);
  const int64_t* y = labels.data<int64_t>();
  double* st = stats.data<double>();  // (B, 2): [lp_i, ln_i]
  // While streaming, per row: the running (max, sum) of lp_i and of ln_i, both holding exp(0).
  const Tensor running = Tensor::empty({B, 4}, {.dtype = DType::f64});
  double* run = running.data<double>();
  // The negatives' exponents beta (s - base) are at most beta (1 - base), and next to the exp(0)
  // term nothing below 0 - kBoundedLogSumExpRange matters (Note [Bounded log-sum-exp]); their
  // sum then starts at exp(0) already shifted, so that each tile adds to it at the same shift.
  const double neg_upper = p.beta * (1 - p.base);
  const std::optional<T> bound = p.beta >= 0 && neg_upper >= 0 ? log_sum_exp_bound<T>(0, neg_upper) : std::nullopt;
  const double neg_start = bound ? double(*bound) : 0;
  for (int64_t i = 0; i < B; ++i)
    run[4 * i] = 0, run[4 * i + 1] = 1, run[4 * i + 2] = neg_start, run[4 * i + 3] = std::exp(-neg_start);

  const T a_pos = T(-p.alpha), b_pos = T(p.alpha * p.base), a_neg = T(p.beta), b_neg = T(-p.beta * p.base);
  const ClassMembers members(y, B);
  auto fold = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* S, T* scratch) {
    const int64_t* yc = y + c0;
    for (int64_t i = r0; i < r1; ++i) {
      double* r = run + 4 * i;
      OnlineLogSumExp pos{r[0], r[1]}, neg{r[2], r[3]};
      const T* s = S + (i - r0) * (c1 - c0);
      const int64_t yi = y[i];
      fold_log_sum_exp_at<T>(pos, members.in_columns(i, c0, c1), c0, i, scratch,
                             [=](int64_t k) { return std::fma(a_pos, s[k], b_pos); });
      fold_log_sum_exp_under<T>(
          bound, neg, c1 - c0, scratch, [=](int64_t k) { return std::fma(a_neg, s[k], b_neg); },
          [=](int64_t k) { return yc[k] != yi; });
      r[0] = pos.max, r[1] = pos.sum, r[2] = neg.max, r[3] = neg.sum;
    }
  };
  for_each_similarity_tile<T>(tiles, e.data<T>(), B, D, e.dtype(), fold);

  double total = 0;
  for (int64_t i = 0; i < B; ++i) {
    const double* r = run + 4 * i;
    st[2 * i] = OnlineLogSumExp{r[0], r[1]}.value(), st[2 * i + 1] = OnlineLogSumExp{r[2], r[3]}.value();
    total += ms_row_loss(st[2 * i], st[2 * i + 1], p);
  }
  loss.data<T>()[0] = B > 0 ? T(total / double(B)) : T(0);
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                    const MultiSimilarityParams& p, const Tensor& stats, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  if (B == 0) return;
  const int64_t* y = labels.data<int64_t>();
  const double* st = stats.data<double>();
  const double scale = double(grad.data<T>()[0]) / double(B);
  // Per row: the offsets b - lp_i and b - ln_i of its positive and negative exponents.
  const Tensor offsets = Tensor::empty({2, B}, {.dtype = e.dtype()});
  T* pos_offset = offsets.data<T>();
  T* neg_offset = pos_offset + B;
  for (int64_t i = 0; i < B; ++i)
    pos_offset[i] = T(p.alpha * p.base - st[2 * i]), neg_offset[i] = T(-p.beta * p.base - st[2 * i + 1]);
  const T a_pos = T(-p.alpha), a_neg = T(p.beta), w_pos = T(-scale), w_neg = T(scale);
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, const T* s, T* w) {
    const int64_t* yc = y + c0;
    const T *pj = pos_offset + c0, *nj = neg_offset + c0;
    const T pi = pos_offset[i], ni = neg_offset[i];
    const T ap = a_pos, an = a_neg, wp = w_pos, wn = w_neg;  // locals: not reloaded per pair
    const int64_t yi = y[i];
    for (int64_t k = 0; k < c1 - c0; ++k) {
      const bool positive = yc[k] == yi;
      const T a = positive ? ap : an, p_j = pj[k], n_j = nj[k];  // both loaded: the select vectorises
      const T sum = fast_exp(std::fma(a, s[k], positive ? pi : ni)) + fast_exp(std::fma(a, s[k], positive ? p_j : n_j));
      w[k] = (positive ? wp : wn) * sum;
    }
  };
  accumulate_similarity_gradient<T>(tiles, e.data<T>(), B, D, e.dtype(), de.data<T>(), row_weights);
}

}  // namespace

void multi_similarity_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels,
                              const MultiSimilarityParams& params, const Tensor& stats, const Tensor& loss) {
  dispatch_float(e.dtype(), "multi_similarity_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, params, stats, loss);
  });
}

void multi_similarity_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                               const MultiSimilarityParams& params, const Tensor& stats, const Tensor& de) {
  dispatch_float(e.dtype(), "multi_similarity_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, params, stats, de);
  });
}

}  // namespace ember::cpu
