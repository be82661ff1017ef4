// ArcFace on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed over
// the B x C cosines (Note [Streamed pairs] in ops/cpu/similarity_tiles.h):
//   forward   each task owns a block of rows and folds tiles of e w^T into a per-row online
//             log-sum-exp of the logits, the plain ones a tile row at a time (Note [Vectorised
//             tile rows]), the target's modified logit added from its tile;
//   backward  Note [Streamed cross similarities]: one pass of recomputed tiles turns c_ic into
//             dloss/dc_ic = (grad / B) arcface_weight(...), scale exp(scale c - lse_i) (grad / B)
//             off the target, and accumulates de and dw.
#include <algorithm>
#include <cmath>

#include "ops/cpu/similarity_tiles.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                   double scale, const Tensor& stats, const Tensor& loss) {
  const int64_t B = e.size(0), D = e.size(1), C = w.size(0);
  const T* E = e.data<T>();
  const T* W = w.data<T>();
  const int64_t* y = labels.data<int64_t>();
  check_class_labels("arcface_loss", y, B, C);
  double* lse = stats.data<double>();
  // Per row: its running (max, sum) while streaming, then its loss (summed in a fixed order below).
  const Tensor rows = Tensor::empty({B, 3}, {.dtype = DType::f64});
  double* row = rows.data<double>();

  for_each_row_block<T>(B, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    for (int64_t i = r0; i < r1; ++i) row[3 * i] = -INFINITY, row[3 * i + 1] = 0, row[3 * i + 2] = 0;
    for (int64_t c0 = 0; c0 < C; c0 += tiles.cols) {
      const int64_t c1 = std::min(C, c0 + tiles.cols), width = c1 - c0;
      const T* S = similarity_tile(E, W, D, r0, r1, c0, c1, buf);
      for (int64_t i = r0; i < r1; ++i) {
        OnlineLogSumExp acc{row[3 * i], row[3 * i + 1]};
        const T* s = S + (i - r0) * width;
        const int64_t target = y[i] - c0;  // in [0, width) when the target is in this tile
        const T slope = T(scale);
        fold_log_sum_exp<T>(
            acc, width, buf.column_scratch, [=](int64_t k) { return slope * s[k]; },
            [=](int64_t k) { return k != target; });
        if (target >= 0 && target < width) {
          const double x = arcface_logit(true, double(s[target]), margin, scale);
          acc.add(x);
          row[3 * i + 2] = x;
        }
        row[3 * i] = acc.max, row[3 * i + 1] = acc.sum;
      }
    }
    for (int64_t i = r0; i < r1; ++i) {
      lse[i] = OnlineLogSumExp{row[3 * i], row[3 * i + 1]}.value();
      row[3 * i] = lse[i] - row[3 * i + 2];
    }
  });

  double total = 0;
  for (int64_t i = 0; i < B; ++i) total += row[3 * i];
  loss.data<T>()[0] = B > 0 ? T(total / double(B)) : T(0);
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& w,
                    const Tensor& labels, double margin, double scale, const Tensor& stats, const Tensor& de,
                    const Tensor& dw) {
  const int64_t B = e.size(0), D = e.size(1), C = w.size(0);
  const int64_t* y = labels.data<int64_t>();
  const double* lse = stats.data<double>();
  const double g = B > 0 ? double(grad.data<T>()[0]) / double(B) : 0.0;
  const T weight = T(g * scale), slope = T(scale);
  // Off the target, (grad / B) scale exp(scale c - lse_i); the target's weight patched after.
  // In place of the cosines (Note [Weights in place] in similarity_tiles.h): the target's is read first.
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, T* sw) {
    const bool has_target = y[i] >= c0 && y[i] < c1;
    const double target_cosine = has_target ? double(sw[y[i] - c0]) : 0.0;
    const T neg_lse = T(-lse[i]), wt = weight, sl = slope;  // locals: not reloaded per pair
    for (int64_t k = 0; k < c1 - c0; ++k) sw[k] = wt * fast_exp(std::fma(sl, sw[k], neg_lse));
    if (has_target) sw[y[i] - c0] = T(g * arcface_weight(true, target_cosine, margin, scale, lse[i]));
  };
  cross_similarity_backward<T>(tiles, e.dtype(), e.data<T>(), B, w.data<T>(), C, D, de.data<T>(), dw.data<T>(),
                               row_weights);
}

}  // namespace

void arcface_forward(const PairTiles& tiles, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                     double scale, const Tensor& stats, const Tensor& loss) {
  dispatch_float(e.dtype(), "arcface_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, w, labels, margin, scale, stats, loss);
  });
}

void arcface_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& w,
                      const Tensor& labels, double margin, double scale, const Tensor& stats, const Tensor& de,
                      const Tensor& dw) {
  dispatch_float(e.dtype(), "arcface_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, w, labels, margin, scale, stats, de, dw);
  });
}

}  // namespace ember::cpu
