#include "losses/multi_similarity.h"

#include <cmath>

#include "autograd/graph.h"
#include "losses/metric_common.h"
#include "ops/kernels.h"

namespace ember {

Tensor multi_similarity_loss(const Tensor& embeddings, const Tensor& labels, MultiSimilarityOptions options) {
  constexpr const char* kOp = "multi_similarity_loss";
  check_embeddings(kOp, embeddings, labels);
  EMBER_CHECK(options.alpha > 0 && std::isfinite(options.alpha), kOp, ": expected a finite alpha > 0, got ",
              options.alpha);
  EMBER_CHECK(options.beta > 0 && std::isfinite(options.beta), kOp, ": expected a finite beta > 0, got ",
              options.beta);
  EMBER_CHECK(std::isfinite(options.base), kOp, ": expected a finite base, got ", options.base);
  const MultiSimilarityParams params{options.alpha, options.beta, options.base};
  const Tensor e = normalize_rows(embeddings).contiguous();
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const Tensor stats = Tensor::empty({e.size(0), 2}, {.dtype = DType::f64, .device = e.device()});
  Tensor loss = Tensor::empty({}, e.options());
  multi_similarity_forward_kernel(e.device(), tiles, e, y, params, stats, loss);
  if (autograd::needs_grad(e))
    autograd::record(kOp, {e}, loss,
                     [es = autograd::save(e), y, stats, tiles, params](const Tensor& grad) -> autograd::TensorList {
                       const Tensor& e = es.get("multi_similarity_loss");
                       Tensor de = Tensor::empty(e.shape(), e.options());
                       multi_similarity_backward_kernel(e.device(), tiles, grad.contiguous(), e, y, params, stats, de);
                       return {de};
                     });
  return loss;
}

}  // namespace ember
