#include "losses/contrastive.h"

#include "autograd/graph.h"
#include "losses/metric_common.h"
#include "ops/kernels.h"

namespace ember {

Tensor contrastive_loss(const Tensor& embeddings, const Tensor& labels, ContrastiveOptions options) {
  constexpr const char* kOp = "contrastive_loss";
  check_embeddings(kOp, embeddings, labels);
  const Tensor e = normalize_rows(embeddings).contiguous();
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const Tensor counts = Tensor::empty({2}, {.dtype = DType::f64, .device = e.device()});
  Tensor loss = Tensor::empty({}, e.options());
  contrastive_forward_kernel(e.device(), tiles, e, y, options.pos_margin, options.neg_margin, counts, loss);
  if (autograd::needs_grad(e))
    autograd::record(kOp, {e}, loss,
                     [es = autograd::save(e), y, counts, tiles, options](const Tensor& grad) -> autograd::TensorList {
                       const Tensor& e = es.get("contrastive_loss");
                       Tensor de = Tensor::empty(e.shape(), e.options());
                       contrastive_backward_kernel(e.device(), tiles, grad.contiguous(), e, y, options.pos_margin,
                                                   options.neg_margin, counts, de);
                       return {de};
                     });
  return loss;
}

}  // namespace ember
