// ArcFace on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h) over the B x C
// cosines c_ic = e_i . w_c, the class weights w_c the columns of w (D, C) (Note [Class weights as
// columns] in ops/cpu/cross_operand.h). Each row's log-sum-exp of its logits takes the plain ones
// with vectorised passes (arcface_whole_row, Note [One exp per logit]; streamed tiles:
// fold_arcface_row, Note [Vectorised tile rows]) and adds the target's modified logit. When the
// gradient is asked for (de, dw: the loss's at grad 1, Note [Gradient in the forward] in
// ops/cpu/triplet_tiled.cpp), c_ic becomes d loss / d c_ic = arcface_weight(...) / B, which is
// scale exp(scale c - lse_i) / B off the target, and de = G w^T, dw = e^T G for those weights G.
//   whole rows   up to tiles.whole_rows / kMinWholeRowBlock classes (1,024 by default): blocks of
//                whole rows, the gradient from the same cosines (Note [Whole rows of cross
//                similarities]);
//   streamed     more classes: tiles of rows x cols folded into per-row statistics (Note [Streamed
//                pairs]), then the gradient from recomputed tiles (Note [Streamed cross
//                similarities]).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/similarity_tiles.h"
#include "ops/cpu/whole_cross_rows.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

// Row i's logits over its classes [c0, c0 + width) (cosines s) folded into acc: the plain ones
// with the vectorised fold, the target's (target in [0, width), else none here) added from its
// cosine and returned; 0 without a target. scratch: width values of T.
template <class T>
double fold_arcface_row(OnlineLogSumExp& acc, const T* s, int64_t width, int64_t target, T* scratch, double margin,
                        double scale) {
  const T slope = T(scale);
  fold_log_sum_exp<T>(
      acc, width, scratch, [=](int64_t k) { return slope * s[k]; }, [=](int64_t k) { return k != target; });
  if (target < 0 || target >= width) return 0;
  const double x = arcface_logit(true, double(s[target]), margin, scale);
  acc.add(x);
  return x;
}

// sw (width) in place, from row i's cosines over [c0, c0 + width) to g d(lse_i - x_iy) / d c_ic:
// g scale exp(scale c - lse_i) off the target, arcface_weight on it (target in [0, width), else
// none here; its cosine is read before the vectorised loop).
template <class T>
void weigh_arcface_row(T* sw, int64_t width, int64_t target, double lse, double g, double margin, double scale) {
  const bool has_target = target >= 0 && target < width;
  const double target_cosine = has_target ? double(sw[target]) : 0.0;
  const T neg_lse = T(-lse), wt = T(g * scale), sl = T(scale);  // locals: not reloaded per pair
  for (int64_t k = 0; k < width; ++k) sw[k] = wt * fast_exp(std::fma(sl, sw[k], neg_lse));
  if (has_target) sw[target] = T(g * arcface_weight(true, target_cosine, margin, scale, lse));
}

// Note [One exp per logit]: a whole row's weights are its softmax, exp(x_k - lse), and the
// log-sum-exp that gives lse already computed exp(x_k - m) for the row's max m: kept in place,
// they become the weights by one factor exp(m - lse), which halves the row's exps (folding and
// weighing with an exp each was about a sixth of an ArcFace step, with the max pass). Two
// roundings instead of one: the weights move by an ulp or so, within the tests' tolerances.

struct ArcFaceRow {
  double lse, target_logit;
};

// Row i's whole row of cosines s (C classes, target in [0, C)) into its log-sum-exp and target
// logit; with weigh, s becomes g d(lse - x_iy) / d s in place (weigh_arcface_row's weights), otherwise
// it holds exp(scale s - m) after, 0 at the target. A NaN cosine makes lse NaN (exp(NaN) reaches
// the sum).
template <class T>
ArcFaceRow arcface_whole_row(T* s, int64_t C, int64_t target, double margin, double scale, double g, bool weigh) {
  constexpr T kLow = -std::numeric_limits<T>::infinity();
  const T slope = T(scale);
  const double target_cosine = double(s[target]);
  const T m = lane_max<T>(C, [=](int64_t k) { return select_bits(k != target, slope * s[k], kLow); });
  const T shift = m == kLow ? T(0) : m;  // only the target, or every other logit -inf or NaN
  for (int64_t k = 0; k < C; ++k) s[k] = fast_exp(std::fma(slope, s[k], -shift));
  s[target] = 0;
  const double sum = lane_sum(C, [=](int64_t k) { return s[k]; });
  OnlineLogSumExp acc;
  if (sum != 0) acc.merge({double(shift), sum});
  const double x = arcface_logit(true, target_cosine, margin, scale);
  acc.add(x);
  const double lse = acc.value();
  if (weigh) {
    const T factor = T(g * scale * std::exp(double(shift) - lse));
    for (int64_t k = 0; k < C; ++k) s[k] *= factor;
    s[target] = T(g * arcface_weight(true, target_cosine, margin, scale, lse));
  }
  return {lse, x};
}

// Streamed (Note [Streamed pairs]): each task owns a block of rows and folds tiles of e w^T into
// per-row online log-sum-exps; row_loss[i] = lse_i - x_iy_i. running: (B, 3) scratch.
template <class T>
void streamed_forward(const PairTiles& tiles, const T* E, CrossOperand<const T> W, const int64_t* y, int64_t B,
                      int64_t C, int64_t D, DType dtype, double margin, double scale, double* running, double* lse,
                      double* row_loss) {
  for_each_row_block<T>(B, tiles, dtype, [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    for (int64_t i = r0; i < r1; ++i) running[3 * i] = -INFINITY, running[3 * i + 1] = 0, running[3 * i + 2] = 0;
    for (int64_t c0 = 0; c0 < C; c0 += tiles.cols) {
      const int64_t c1 = std::min(C, c0 + tiles.cols), width = c1 - c0;
      const T* S = similarity_tile(E, D, W, r0, r1, c0, c1, buf);
      for (int64_t i = r0; i < r1; ++i) {
        double* r = running + 3 * i;  // [max, sum, the target's logit]
        OnlineLogSumExp acc{r[0], r[1]};
        const double x = fold_arcface_row(acc, S + (i - r0) * width, width, y[i] - c0, buf.column_scratch, margin,
                                          scale);
        if (y[i] >= c0 && y[i] < c1) r[2] = x;
        r[0] = acc.max, r[1] = acc.sum;
      }
    }
    for (int64_t i = r0; i < r1; ++i) {
      const double* r = running + 3 * i;
      lse[i] = OnlineLogSumExp{r[0], r[1]}.value(), row_loss[i] = lse[i] - r[2];
    }
  });
}

// Note [Streamed cross similarities]: one pass of recomputed tiles weighs them (g = 1 / B: the
// mean's gradient) and accumulates de and dw.
template <class T>
void streamed_gradient(const PairTiles& tiles, const T* E, CrossOperand<const T> W, const int64_t* y, int64_t B,
                       int64_t C, int64_t D, DType dtype, double margin, double scale, const double* lse, T* dE,
                       CrossOperand<T> dW) {
  const double g = 1.0 / double(B);
  cross_similarity_backward<T>(tiles, dtype, E, B, W, C, D, dE, dW, [&](int64_t i, int64_t c0, int64_t c1, T* sw) {
    weigh_arcface_row(sw, c1 - c0, y[i] - c0, lse[i], g, margin, scale);
  });
}

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                   double scale, const Tensor& stats, const Tensor& loss, const Tensor& de, const Tensor& dw) {
  const int64_t B = e.size(0), D = e.size(1), C = w.size(1);
  const T* E = e.data<T>();
  const auto W = CrossOperand<const T>::as_columns(w.data<T>(), w.stride(0));
  const int64_t* y = labels.data<int64_t>();
  check_class_labels("arcface_loss", y, B, C);
  double* lse = stats.data<double>();
  // Per row: lse_i - x_iy (summed in order below), and the streamed pass's running statistics.
  const Tensor rows = Tensor::empty({4 * B}, {.dtype = DType::f64});
  double* row_loss = rows.data<double>();
  // The gradients wanted: either may be left out (Note [Whole rows of cross similarities]).
  T* dE = de.defined() && B > 0 ? de.data<T>() : nullptr;
  const auto dW = CrossOperand<T>::as_columns(dw.defined() && B > 0 ? dw.data<T>() : nullptr,
                                              dw.defined() ? dw.stride(0) : 0);
  if (dw.defined() && B == 0) CrossOperand<T>::as_columns(dw.data<T>(), dw.stride(0)).zero(C, D);

  if (fits_whole_rows(C, tiles)) {  // Note [Whole rows of cross similarities]
    const double g = B > 0 ? 1.0 / double(B) : 0.0;
    whole_row_pass<T>(tiles, e.dtype(), E, B, W, C, D, dE, dW, [&](int64_t i, T* s, T*, bool weigh) {
      const ArcFaceRow row = arcface_whole_row(s, C, y[i], margin, scale, g, weigh);
      lse[i] = row.lse, row_loss[i] = row.lse - row.target_logit;
    });
  } else {
    streamed_forward(tiles, E, W, y, B, C, D, e.dtype(), margin, scale, row_loss + B, lse, row_loss);
    if (dE || dW) streamed_gradient(tiles, E, W, y, B, C, D, e.dtype(), margin, scale, lse, dE, dW);
  }

  double total = 0;
  for (int64_t i = 0; i < B; ++i) total += row_loss[i];
  loss.data<T>()[0] = B > 0 ? T(total / double(B)) : T(0);
}

}  // namespace

void arcface_forward(const PairTiles& tiles, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                     double scale, const Tensor& stats, const Tensor& loss, const Tensor& de, const Tensor& dw) {
  dispatch_float(e.dtype(), "arcface_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, w, labels, margin, scale, stats, loss, de, dw);
  });
}

}  // namespace ember::cpu
