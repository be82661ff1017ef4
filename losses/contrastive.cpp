#include "losses/contrastive.h"

#include "losses/metric_common.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"

namespace ember {

Tensor contrastive_loss(const Tensor& embeddings, const Tensor& labels, ContrastiveOptions options) {
  constexpr const char* kOp = "contrastive_loss";
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(contrastive_loss(widened(embeddings), labels, options), embeddings.dtype());
  const PairLossInputs in = pair_loss_inputs(kOp, embeddings, labels, Shape{2});
  const Tensor counts = in.counted;  // [P, N]
  Tensor loss = Tensor::empty({}, in.e.options());
  contrastive_forward_kernel(in.e.device(), in.tiles, in.e, in.labels, options.pos_margin, options.neg_margin,
                             in.poison, counts, loss);
  const Tensor& y = in.labels;  // what the node keeps (not in.e: the node saves it)
  const PairTiles& tiles = in.tiles;
  return record_pair_loss(kOp, in, loss, [=](const Tensor& grad, const Tensor& e) {
    Tensor de = Tensor::empty(e.shape(), e.options());
    contrastive_backward_kernel(e.device(), tiles, grad, e, y, options.pos_margin, options.neg_margin,
                                counts, de);
    return de;
  });
}

}  // namespace ember
