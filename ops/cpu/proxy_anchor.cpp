// ProxyAnchor on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h) over the C x B
// cosines s_ic = e_i . p_c. Each class sums its members' terms and the others' into two
// log-sum-exps, each starting from PML's add_one 0 (whole rows: proxy_whole_row, Note [One exp per
// logit] in ops/cpu/arcface.cpp; streamed tiles: fold_proxy_row, Note [Vectorised tile rows]). When the
// gradient is asked for (de, dp: the loss's at grad 1, Note [Gradient in the forward] in
// ops/cpu/triplet_tiled.cpp), s_ic becomes d loss / d s_ic = proxy_anchor_weight(...), and
// de = W^T p, dp = W e.
//   whole rows   up to tiles.whole_rows / kMinWholeRowBlock embeddings (1,024 by default):
//                blocks of classes, each with its whole row over the batch, the gradient from the
//                same cosines (Note [Whole rows of cross similarities]);
//   streamed     larger batches: tiles of classes x embeddings folded into per-class sums (Note
//                [Streamed pairs]), then the gradient from recomputed tiles of e p^T (Note
//                [Streamed cross similarities]).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "ops/cpu/class_members.h"
#include "ops/cpu/similarity_tiles.h"
#include "ops/cpu/whole_cross_rows.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

// x = alpha (margin - s) for a member, alpha (s + margin) otherwise: a_pos s + b and a_neg s + b.
template <class T>
struct ProxyExponents {
  T a_pos, a_neg, b;
  ProxyExponents(double margin, double alpha) : a_pos(T(-alpha)), a_neg(T(alpha)), b(T(alpha * margin)) {}
};

// Class c's two running sums over embeddings [i0, i0 + width) (cosines s, labels yi): its members'
// terms into pos, the others' into neg (Note [Vectorised tile rows]). scratch: width values of T.
template <class T>
void fold_proxy_row(OnlineLogSumExp& pos, OnlineLogSumExp& neg, const T* s, const int64_t* yi, int64_t width,
                    int64_t c, T* scratch, const ProxyExponents<T>& x) {
  const T a_pos = x.a_pos, a_neg = x.a_neg, b = x.b;
  fold_log_sum_exp<T>(
      pos, width, scratch, [=](int64_t k) { return std::fma(a_pos, s[k], b); }, [=](int64_t k) { return yi[k] == c; });
  fold_log_sum_exp<T>(
      neg, width, scratch, [=](int64_t k) { return std::fma(a_neg, s[k], b); }, [=](int64_t k) { return yi[k] != c; });
}

// Class c's whole row of cosines s over the batch (B embeddings, `members` those with label c)
// into its two log-sum-exps {pos_c, neg_c}, each with PML's add_one; with weigh, s becomes d loss
// / d s in place (proxy_anchor_weight's; pos_divisor: the classes present, neg_factor = alpha /
// C). The negatives take one exp each (Note [One exp per logit] in ops/cpu/arcface.cpp): exp(x -
// m) for their max m, the weights by one factor exp(m - neg_c). The members, a few per class, are
// taken out of the row first (their cosines to scratch, their exponents to -inf) and done one by
// one in double, so no vector loop reads the labels. A NaN cosine reaches its part's sum.
template <class T>
std::pair<double, double> proxy_whole_row(T* s, std::span<const int64_t> members, int64_t B, T* scratch,
                                          const ProxyExponents<T>& x, double margin, double alpha, double pos_divisor,
                                          double neg_factor, bool weigh) {
  const int64_t count = int64_t(members.size());
  OnlineLogSumExp pos;
  pos.add(0);  // PML's add_one
  for (int64_t m = 0; m < count; ++m) {
    scratch[m] = s[members[m]];
    pos.add(proxy_anchor_exponent(true, double(scratch[m]), margin, alpha));
  }
  const T a_neg = x.a_neg, b = x.b;  // locals: not reloaded per embedding
  for (int64_t k = 0; k < B; ++k) s[k] = std::fma(a_neg, s[k], b);
  for (const int64_t k : members) s[k] = -std::numeric_limits<T>::infinity();
  const T shift = std::max(T(0), lane_max<T>(B, [=](int64_t k) { return s[k]; }));  // add_one's 0 too
  for (int64_t k = 0; k < B; ++k) s[k] = fast_exp(s[k] - shift);
  const double sum = lane_sum(B, [=](int64_t k) { return s[k]; }) + std::exp(-double(shift));
  const double neg = OnlineLogSumExp{double(shift), sum}.value();
  const double pos_lse = pos.value();
  if (weigh) {
    const T factor = T(neg_factor * std::exp(double(shift) - neg));
    for (int64_t k = 0; k < B; ++k) s[k] *= factor;
    for (int64_t m = 0; m < count; ++m)
      s[members[m]] = T(proxy_anchor_weight(true, double(scratch[m]), margin, alpha, pos_lse, pos_divisor));
  }
  return {pos_lse, neg};
}

// The number of classes with a member in the batch; flags: C doubles of scratch.
double classes_present(const int64_t* y, int64_t B, int64_t C, double* flags) {
  std::fill(flags, flags + C, 0.0);
  for (int64_t i = 0; i < B; ++i) flags[y[i]] = 1;
  double classes = 0;
  for (int64_t c = 0; c < C; ++c) classes += flags[c];
  return classes;
}

// Streamed (Note [Streamed pairs]): each task owns a block of classes and folds tiles of p e^T into
// per-class running sums. running: (C, 4) scratch.
template <class T>
void streamed_forward(const PairTiles& tiles, const T* E, const T* P, const int64_t* y, int64_t B, int64_t C,
                      int64_t D, DType dtype, const ProxyExponents<T>& x, double* running, double* st) {
  for_each_row_block<T>(C, tiles, dtype, [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    for (int64_t c = r0; c < r1; ++c) {
      OnlineLogSumExp one;
      one.add(0);  // PML's add_one
      double* r = running + 4 * c;
      r[0] = one.max, r[1] = one.sum, r[2] = one.max, r[3] = one.sum;
    }
    for (int64_t i0 = 0; i0 < B; i0 += tiles.cols) {
      const int64_t i1 = std::min(B, i0 + tiles.cols), width = i1 - i0;
      const T* S = similarity_tile(P, D, CrossOperand<const T>::as_rows(E, D), r0, r1, i0, i1, buf);
      for (int64_t c = r0; c < r1; ++c) {
        double* r = running + 4 * c;
        OnlineLogSumExp pos{r[0], r[1]}, neg{r[2], r[3]};
        fold_proxy_row(pos, neg, S + (c - r0) * width, y + i0, width, c, buf.column_scratch, x);
        r[0] = pos.max, r[1] = pos.sum, r[2] = neg.max, r[3] = neg.sum;
      }
    }
    for (int64_t c = r0; c < r1; ++c) {
      const double* r = running + 4 * c;
      st[2 * c] = OnlineLogSumExp{r[0], r[1]}.value(), st[2 * c + 1] = OnlineLogSumExp{r[2], r[3]}.value();
    }
  });
}

// Note [Streamed cross similarities] over e p^T: one pass of recomputed tiles turns s_ic into
// d loss / d s_ic (proxy_anchor_weight) and accumulates de and dp; a row's one positive class
// (its label) is patched after the vectorised negative weights.
template <class T>
void streamed_gradient(const PairTiles& tiles, const T* E, const T* P, const int64_t* y, int64_t B, int64_t C,
                       int64_t D, DType dtype, double margin, double alpha, const double* st, double classes,
                       T* offset, T* dE, T* dP) {
  // Off the label, alpha exp(alpha (s + margin) - neg_c) / C = factor exp(alpha s + offset_c).
  for (int64_t c = 0; c < C; ++c) offset[c] = T(alpha * margin - st[2 * c + 1]);
  const T weight = T(alpha / double(C)), slope = T(alpha);
  // In place of the cosines (Note [Weights in place] in similarity_tiles.h): the target's is read first.
  cross_similarity_backward<T>(tiles, dtype, E, B, CrossOperand<const T>::as_rows(P, D), C, D, dE,
                               CrossOperand<T>::as_rows(dP, D), [&](int64_t i, int64_t c0, int64_t c1, T* sw) {
    const bool has_target = y[i] >= c0 && y[i] < c1;
    const double target_cosine = has_target ? double(sw[y[i] - c0]) : 0.0;
    const T* off = offset + c0;
    const T wt = weight, sl = slope;  // locals: not reloaded per pair
    for (int64_t k = 0; k < c1 - c0; ++k) sw[k] = wt * fast_exp(std::fma(sl, sw[k], off[k]));
    if (has_target) sw[y[i] - c0] = T(proxy_anchor_weight(true, target_cosine, margin, alpha, st[2 * y[i]], classes));
  });
}

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& p, const Tensor& labels, double margin,
                   double alpha, const Tensor& stats, const Tensor& present, const Tensor& loss, const Tensor& de,
                   const Tensor& dp) {
  const int64_t B = e.size(0), D = e.size(1), C = p.size(0);
  const T* E = e.data<T>();
  const T* P = p.data<T>();
  const int64_t* y = labels.data<int64_t>();
  check_class_labels("proxy_anchor_loss", y, B, C);
  double* st = stats.data<double>();  // (C, 2): [pos_c, neg_c]
  const bool whole_rows = fits_whole_rows(B, tiles);
  // Whole rows visit each class's members; the streamed pass needs only their number, and 4 C
  // doubles of running sums (whose first C flag the classes present first).
  std::optional<MembersByClass> by_class;
  Tensor running;
  if (whole_rows) by_class.emplace(y, B, C);
  else running = Tensor::empty({4 * C}, {.dtype = DType::f64});
  const double classes = whole_rows ? double(by_class->present()) : classes_present(y, B, C, running.data<double>());
  const ProxyExponents<T> x(margin, alpha);
  // The gradients wanted, either may be left out; with no class present the loss is 0 whatever
  // e and p.
  T* dE = de.defined() && classes > 0 ? de.data<T>() : nullptr;
  T* dP = dp.defined() && classes > 0 ? dp.data<T>() : nullptr;
  if (de.defined() && !dE) std::fill(de.data<T>(), de.data<T>() + B * D, T(0));
  if (dp.defined() && !dP) std::fill(dp.data<T>(), dp.data<T>() + C * D, T(0));

  if (whole_rows) {  // Note [Whole rows of cross similarities], a proxy's row over the batch
    whole_row_pass<T>(tiles, e.dtype(), P, C, CrossOperand<const T>::as_rows(E, D), B, D, dP,
                      CrossOperand<T>::as_rows(dE, D), [&](int64_t c, T* s, T* scratch, bool weigh) {
      std::tie(st[2 * c], st[2 * c + 1]) = proxy_whole_row(s, by_class->of(c), B, scratch, x, margin, alpha,
                                                           std::max(classes, 1.0), alpha / double(C), weigh);
    });
  } else {
    streamed_forward(tiles, E, P, y, B, C, D, e.dtype(), x, running.data<double>(), st);
    if (dE || dP) {
      const Tensor offsets = Tensor::empty({C}, {.dtype = e.dtype()});
      streamed_gradient(tiles, E, P, y, B, C, D, e.dtype(), margin, alpha, st, classes, offsets.data<T>(), dE, dP);
    }
  }

  double pos = 0, neg = 0;
  for (int64_t c = 0; c < C; ++c) pos += st[2 * c], neg += st[2 * c + 1];
  present.data<double>()[0] = classes;
  loss.data<T>()[0] = classes > 0 ? T(pos / classes + neg / double(C)) : T(0);
}

}  // namespace

void proxy_anchor_forward(const PairTiles& tiles, const Tensor& e, const Tensor& p, const Tensor& labels,
                          double margin, double alpha, const Tensor& stats, const Tensor& present, const Tensor& loss,
                          const Tensor& de, const Tensor& dp) {
  dispatch_float(e.dtype(), "proxy_anchor_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, p, labels, margin, alpha, stats, present, loss, de, dp);
  });
}

}  // namespace ember::cpu
