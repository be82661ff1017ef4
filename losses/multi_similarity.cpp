#include "losses/multi_similarity.h"

#include <cmath>

#include "losses/metric_common.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"

namespace ember {

Tensor multi_similarity_loss(const Tensor& embeddings, const Tensor& labels, MultiSimilarityOptions options) {
  constexpr const char* kOp = "multi_similarity_loss";
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(multi_similarity_loss(widened(embeddings), labels, options), embeddings.dtype());
  const PairLossInputs in = pair_loss_inputs(kOp, embeddings, labels, std::nullopt);  // MeanReducer: no zero_loss
  EMBER_CHECK(options.alpha > 0 && std::isfinite(options.alpha), kOp, ": expected a finite alpha > 0, got ",
              options.alpha);
  EMBER_CHECK(options.beta > 0 && std::isfinite(options.beta), kOp, ": expected a finite beta > 0, got ",
              options.beta);
  EMBER_CHECK(std::isfinite(options.base), kOp, ": expected a finite base, got ", options.base);
  const MultiSimilarityParams params{options.alpha, options.beta, options.base};
  const Tensor stats = Tensor::empty({in.e.size(0), 2}, {.dtype = DType::f64, .device = in.e.device()});
  Tensor loss = Tensor::empty({}, in.e.options());
  multi_similarity_forward_kernel(in.e.device(), in.tiles, in.e, in.labels, params, stats, loss);
  const Tensor& y = in.labels;  // what the node keeps (not in.e: the node saves it)
  const PairTiles& tiles = in.tiles;
  return record_pair_loss(kOp, in, loss, [=](const Tensor& grad, const Tensor& e) {
    Tensor de = Tensor::empty(e.shape(), e.options());
    multi_similarity_backward_kernel(e.device(), tiles, grad, e, y, params, stats, de);
    return de;
  });
}

}  // namespace ember
