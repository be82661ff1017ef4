#include "losses/ntxent.h"

#include "losses/metric_common.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"

namespace ember {

Tensor ntxent_loss(const Tensor& embeddings, const Tensor& labels, NTXentOptions options) {
  constexpr const char* kOp = "ntxent_loss";
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(ntxent_loss(widened(embeddings), labels, options), embeddings.dtype());
  const PairLossInputs in = pair_loss_inputs(kOp, embeddings, labels, Shape{});
  EMBER_CHECK(options.temperature > 0, kOp, ": expected temperature > 0, got ", options.temperature);
  const TensorOptions f64{.dtype = DType::f64, .device = in.e.device()};
  const Tensor stats = Tensor::empty({in.e.size(0), 2}, f64), pairs = in.counted;
  Tensor loss = Tensor::empty({}, in.e.options());
  ntxent_forward_kernel(in.e.device(), in.tiles, in.e, in.labels, options.temperature, in.poison, stats, loss,
                        pairs);
  const Tensor& y = in.labels;  // what the node keeps (not in.e: the node saves it)
  const PairTiles& tiles = in.tiles;
  return record_pair_loss(kOp, in, loss, [=, t = options.temperature](const Tensor& grad, const Tensor& e) {
    Tensor de = Tensor::empty(e.shape(), e.options());
    ntxent_backward_kernel(e.device(), tiles, grad, e, y, t, stats, pairs, de);
    return de;
  });
}

}  // namespace ember
