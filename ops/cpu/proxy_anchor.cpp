// ProxyAnchor on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// over the C x B cosines (Note [Streamed pairs] in ops/cpu/similarity_tiles.h):
//   forward   each task owns a block of classes and folds tiles of p e^T into per-class
//             running sums: two online log-sum-exps, each starting from PML's add_one 0, a tile
//             row at a time (Note [Vectorised tile rows]);
//   backward  Note [Streamed cross similarities]: one pass of recomputed tiles of e p^T turns
//             s_ic into grad * proxy_anchor_weight(...) and accumulates de and dp; a row's one
//             positive class (its label) is patched after the vectorised negative weights.
#include <algorithm>
#include <cmath>

#include "ops/cpu/similarity_tiles.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& p, const Tensor& labels, double margin,
                   double alpha, const Tensor& stats, const Tensor& present, const Tensor& loss) {
  const int64_t B = e.size(0), D = e.size(1), C = p.size(0);
  const T* E = e.data<T>();
  const T* P = p.data<T>();
  const int64_t* y = labels.data<int64_t>();
  check_class_labels("proxy_anchor_loss", y, B, C);
  double* st = stats.data<double>();  // (C, 2): [pos_c, neg_c]
  // Per class while streaming: running (max, sum) of its positive and negative terms.
  const Tensor running = Tensor::empty({C, 4}, {.dtype = DType::f64});
  double* run = running.data<double>();
  // x = alpha (margin - s) for a member, alpha (s + margin) otherwise: a_pos s + b_pos or a_neg s + b_neg.
  const T a_pos = T(-alpha), b_pos = T(alpha * margin), a_neg = T(alpha), b_neg = T(alpha * margin);

  for_each_row_block<T>(C, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    for (int64_t c = r0; c < r1; ++c) {
      OnlineLogSumExp one;
      one.add(0);  // PML's add_one
      run[4 * c] = one.max, run[4 * c + 1] = one.sum, run[4 * c + 2] = one.max, run[4 * c + 3] = one.sum;
    }
    for (int64_t i0 = 0; i0 < B; i0 += tiles.cols) {
      const int64_t i1 = std::min(B, i0 + tiles.cols), width = i1 - i0;
      const T* S = similarity_tile(P, E, D, r0, r1, i0, i1, buf);
      const int64_t* yi = y + i0;
      for (int64_t c = r0; c < r1; ++c) {
        OnlineLogSumExp pos{run[4 * c], run[4 * c + 1]}, neg{run[4 * c + 2], run[4 * c + 3]};
        const T* s = S + (c - r0) * width;
        T* scratch = buf.column_scratch;
        fold_log_sum_exp<T>(
            pos, width, scratch, [=](int64_t k) { return std::fma(a_pos, s[k], b_pos); },
            [=](int64_t k) { return yi[k] == c; });
        fold_log_sum_exp<T>(
            neg, width, scratch, [=](int64_t k) { return std::fma(a_neg, s[k], b_neg); },
            [=](int64_t k) { return yi[k] != c; });
        run[4 * c] = pos.max, run[4 * c + 1] = pos.sum, run[4 * c + 2] = neg.max, run[4 * c + 3] = neg.sum;
      }
    }
    for (int64_t c = r0; c < r1; ++c) {
      st[2 * c] = OnlineLogSumExp{run[4 * c], run[4 * c + 1]}.value();
      st[2 * c + 1] = OnlineLogSumExp{run[4 * c + 2], run[4 * c + 3]}.value();
    }
  });

  // The classes present in the batch, from the labels (reusing the running sums' storage).
  std::fill(run, run + C, 0.0);
  for (int64_t i = 0; i < B; ++i) run[y[i]] = 1;
  double pos = 0, neg = 0, classes = 0;
  for (int64_t c = 0; c < C; ++c) pos += st[2 * c], neg += st[2 * c + 1], classes += run[c];
  present.data<double>()[0] = classes;
  loss.data<T>()[0] = classes > 0 ? T(pos / classes + neg / double(C)) : T(0);
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& p,
                    const Tensor& labels, double margin, double alpha, const Tensor& stats, const Tensor& present,
                    const Tensor& de, const Tensor& dp) {
  const int64_t B = e.size(0), D = e.size(1), C = p.size(0);
  const int64_t* y = labels.data<int64_t>();
  const double* st = stats.data<double>();
  const double classes = present.data<double>()[0];
  const double g = classes > 0 ? double(grad.data<T>()[0]) : 0.0;
  // Off the label, g alpha exp(alpha (s + margin) - neg_c) / C = factor exp(alpha s + offset_c).
  const Tensor offsets = Tensor::empty({C}, {.dtype = e.dtype()});
  T* offset = offsets.data<T>();
  for (int64_t c = 0; c < C; ++c) offset[c] = T(alpha * margin - st[2 * c + 1]);
  const T weight = T(g * alpha / double(C)), slope = T(alpha);
  // In place of the cosines (Note [Weights in place] in similarity_tiles.h): the target's is read first.
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, T* sw) {
    const bool has_target = y[i] >= c0 && y[i] < c1;
    const double target_cosine = has_target ? double(sw[y[i] - c0]) : 0.0;
    const T* off = offset + c0;
    const T wt = weight, sl = slope;  // locals: not reloaded per pair
    for (int64_t k = 0; k < c1 - c0; ++k) sw[k] = wt * fast_exp(std::fma(sl, sw[k], off[k]));
    if (has_target)
      sw[y[i] - c0] = T(g * proxy_anchor_weight(true, target_cosine, margin, alpha, st[2 * y[i]], classes));
  };
  cross_similarity_backward<T>(tiles, e.dtype(), e.data<T>(), B, p.data<T>(), C, D, de.data<T>(), dp.data<T>(),
                               row_weights);
}

}  // namespace

void proxy_anchor_forward(const PairTiles& tiles, const Tensor& e, const Tensor& p, const Tensor& labels,
                          double margin, double alpha, const Tensor& stats, const Tensor& present, const Tensor& loss) {
  dispatch_float(e.dtype(), "proxy_anchor_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, p, labels, margin, alpha, stats, present, loss);
  });
}

void proxy_anchor_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& p,
                           const Tensor& labels, double margin, double alpha, const Tensor& stats,
                           const Tensor& present, const Tensor& de, const Tensor& dp) {
  dispatch_float(e.dtype(), "proxy_anchor_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, p, labels, margin, alpha, stats, present, de, dp);
  });
}

}  // namespace ember::cpu
