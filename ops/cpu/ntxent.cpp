// NT-Xent on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// (Note [Self-similarity passes] in ops/cpu/self_similarity_passes.h):
//   forward   one pass of similarity tiles folds each anchor's negatives into lse_i
//             (fold_log_sum_exp); the few positive pairs are then revisited with a dot product
//             each (no second GEMM pass);
//   backward  one pass of tiles turns s_ij into dloss/ds_ij + dloss/ds_ji and accumulates
//             de_i += that weight * e_j with the GEMM.
// d loss / d s for one anchor i, with P positive pairs in the batch and z_ij = s_ij / t - lse_i:
//   positive j:  dz_ij / (t P)                        (dz from ntxent_pair)
//   negative k:  -exp(s_ik / t - lse_i) G_i / (t P)   (through lse_i of every positive of i)
#include <algorithm>
#include <limits>

#include "ops/cpu/class_members.h"
#include "ops/cpu/self_similarity_passes.h"
#include "ops/cpu/vec_math.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                   const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& pairs) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const ClassMembers members(y, B);
  double* st = stats.data<double>();  // (B, 2): [lse_i, G_i]
  const double inv_t = 1.0 / temperature, small = small_val<T>();
  // Per anchor: its loss sum and positive count (summed in a fixed order below).
  const Tensor rows = Tensor::empty({B, 2}, {.dtype = DType::f64});
  double* row = rows.data<double>();
  for (int64_t i = 0; i < B; ++i) st[2 * i] = -INFINITY, st[2 * i + 1] = 0;

  // While streaming, st holds each anchor's running (max, sum) over its negatives.
  // s_ij / t lies in [-1 / t, 1 / t] (Note [Bounded log-sum-exp]).
  const std::optional<T> bound = log_sum_exp_bound<T>(-inv_t, inv_t);
  auto fold = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* S, T* scratch) {
    const int64_t* yc = y + c0;
    const T scale = T(inv_t);
    for (int64_t i = r0; i < r1; ++i) {
      // This tile's share of lse_i over i's negatives (Note [Vectorised tile rows]).
      const T* s = S + (i - r0) * (c1 - c0);
      const int64_t yi = y[i];
      OnlineLogSumExp lse{st[2 * i], st[2 * i + 1]};
      fold_log_sum_exp_under<T>(
          bound, lse, c1 - c0, scratch, [=](int64_t k) { return s[k] * scale; },
          [=](int64_t k) { return yc[k] != yi; });
      st[2 * i] = lse.max, st[2 * i + 1] = lse.sum;
    }
  };
  for_each_similarity_tile<T>(tiles, E, B, D, e.dtype(), fold);

  parallel_for(0, B, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const double lse_i = OnlineLogSumExp{st[2 * i], st[2 * i + 1]}.value();
      double loss_i = 0, dz_i = 0, count = 0;
      for (const int64_t j : members.of(i)) {
        if (j == i) continue;
        const NTXentPair p = ntxent_pair(row_dot(E, E, D, i, j) * inv_t - lse_i, small);
        loss_i += p.loss, dz_i += p.dz, count += 1;
      }
      st[2 * i] = lse_i, st[2 * i + 1] = dz_i;
      row[2 * i] = loss_i, row[2 * i + 1] = count;
    }
  });

  double total = 0, positives = 0;
  bool any_negative = false;
  for (int64_t i = 0; i < B; ++i) {
    total += row[2 * i], positives += row[2 * i + 1];
    any_negative |= st[2 * i] != -INFINITY;
  }
  const bool defined = positives > 0 && any_negative;
  loss.data<T>()[0] = defined ? T(total / positives) : poison.data<T>()[0];  // Note [Non-finite embeddings]
  pairs.data<double>()[0] = defined ? positives : 0;
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                    double temperature, const Tensor& stats, const Tensor& pairs, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  T* dE = de.data<T>();
  const double P = pairs.data<double>()[0];
  if (P == 0) {
    std::fill(dE, dE + B * D, T(0));
    return;
  }
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const ClassMembers members(y, B);
  const double* st = stats.data<double>();
  const double inv_t = 1.0 / temperature, small = small_val<T>();
  const double scale = double(grad.data<T>()[0]) * inv_t / P;
  // Per anchor, contiguous for the vectorised loop below: lse_i and scale * G_i.
  const Tensor terms = Tensor::empty({2, B}, {.dtype = e.dtype()});
  T* lse = terms.data<T>();
  T* g = lse + B;
  for (int64_t i = 0; i < B; ++i) lse[i] = T(st[2 * i]), g[i] = T(scale * st[2 * i + 1]);
  // dloss/ds_ij through anchor i's terms (ds_ji's is the same with i and j swapped).
  auto through_anchor = [&](int64_t i, int64_t j, double s) {
    return ntxent_weight(y[j] == y[i], s * inv_t, st[2 * i], st[2 * i + 1], small);
  };
  const T t_inv = T(inv_t);
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, const T* s, T* w) {
    // Every pair as a negative one (vectorisable; a positive pair may give inf * 0 here), then the
    // positive pairs overwritten exactly (a row has as many as its class has other members).
    const T *lse_col = lse + c0, *g_col = g + c0;
    const T lse_i = lse[i], g_i = g[i], t = t_inv;  // locals: not reloaded per pair
    for (int64_t k = 0; k < c1 - c0; ++k) {
      const T x = s[k] * t;
      w[k] = -(fast_exp(T(x - lse_i)) * g_i + fast_exp(T(x - lse_col[k])) * g_col[k]);
    }
    for (const int64_t j : members.in_columns(i, c0, c1))
      if (j != i) w[j - c0] = T(scale * (through_anchor(i, j, s[j - c0]) + through_anchor(j, i, s[j - c0])));
  };
  accumulate_similarity_gradient<T>(tiles, E, B, D, e.dtype(), dE, row_weights);
}

}  // namespace

void ntxent_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                    const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& pairs) {
  dispatch_float(e.dtype(), "ntxent_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, temperature, poison, stats, loss, pairs);
  });
}

void ntxent_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                     double temperature, const Tensor& stats, const Tensor& pairs, const Tensor& de) {
  dispatch_float(e.dtype(), "ntxent_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, temperature, stats, pairs, de);
  });
}

}  // namespace ember::cpu
