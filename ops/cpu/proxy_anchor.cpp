// ProxyAnchor on the CPU (contract in ops/kernels.h, rules in ops/metric_rules.h), streamed
// over the C x B cosines (Note [Streamed pairs] in ops/cpu/similarity_tiles.h):
//   forward   each task owns a block of classes and folds tiles of p e^T into per-class
//             running sums: two online log-sum-exps, each starting from PML's add_one 0;
//   backward  Note [Streamed cross similarities]: two passes of recomputed tiles turn s_ic into
//             grad * proxy_anchor_weight(...) and accumulate de and dp.
#include <algorithm>

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
  // Per class while streaming: running (max, sum) of its positive and negative terms, members.
  const Tensor running = Tensor::empty({C, 5}, {.dtype = DType::f64});
  double* run = running.data<double>();

  for_each_row_block<T>(C, tiles, e.dtype(), [&](int64_t r0, int64_t r1, TileBuffers<T>& buf) {
    for (int64_t c = r0; c < r1; ++c) {
      OnlineLogSumExp one;
      one.add(0);  // PML's add_one
      run[5 * c] = one.max, run[5 * c + 1] = one.sum, run[5 * c + 2] = one.max, run[5 * c + 3] = one.sum;
      run[5 * c + 4] = 0;
    }
    for (int64_t i0 = 0; i0 < B; i0 += tiles.cols) {
      const int64_t i1 = std::min(B, i0 + tiles.cols), width = i1 - i0;
      const T* S = similarity_tile(P, E, D, r0, r1, i0, i1, buf);
      for (int64_t c = r0; c < r1; ++c) {
        OnlineLogSumExp pos{run[5 * c], run[5 * c + 1]}, neg{run[5 * c + 2], run[5 * c + 3]};
        const T* s = S + (c - r0) * width;
        for (int64_t i = i0; i < i1; ++i) {
          const bool positive = y[i] == c;
          (positive ? pos : neg).add(proxy_anchor_exponent(positive, double(s[i - i0]), margin, alpha));
          run[5 * c + 4] += positive ? 1 : 0;
        }
        run[5 * c] = pos.max, run[5 * c + 1] = pos.sum, run[5 * c + 2] = neg.max, run[5 * c + 3] = neg.sum;
      }
    }
    for (int64_t c = r0; c < r1; ++c) {
      st[2 * c] = OnlineLogSumExp{run[5 * c], run[5 * c + 1]}.value();
      st[2 * c + 1] = OnlineLogSumExp{run[5 * c + 2], run[5 * c + 3]}.value();
    }
  });

  double pos = 0, neg = 0, classes = 0;
  for (int64_t c = 0; c < C; ++c) pos += st[2 * c], neg += st[2 * c + 1], classes += run[5 * c + 4] > 0 ? 1 : 0;
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
  cross_similarity_backward<T>(tiles, e.dtype(), e.data<T>(), B, p.data<T>(), C, D, de.data<T>(), dp.data<T>(),
                               [&](int64_t i, int64_t c, double s) {
                                 const bool positive = y[i] == c;
                                 const double lse_c = st[2 * c + (positive ? 0 : 1)];
                                 return g * proxy_anchor_weight(positive, s, margin, alpha, lse_c,
                                                                positive ? classes : double(C));
                               });
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
