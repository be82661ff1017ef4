#include "losses/ntxent.h"

#include "autograd/graph.h"
#include "losses/metric_common.h"
#include "ops/kernels.h"

namespace ember {

Tensor ntxent_loss(const Tensor& embeddings, const Tensor& labels, NTXentOptions options) {
  constexpr const char* kOp = "ntxent_loss";
  check_embeddings(kOp, embeddings, labels);
  EMBER_CHECK(options.temperature > 0, kOp, ": expected temperature > 0, got ", options.temperature);
  const Tensor e = normalize_rows(embeddings).contiguous();
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const TensorOptions f64{.dtype = DType::f64, .device = e.device()};
  const Tensor stats = Tensor::empty({e.size(0), 2}, f64);
  const Tensor pairs = Tensor::empty({}, f64);
  Tensor loss = Tensor::empty({}, e.options());
  ntxent_forward_kernel(e.device(), tiles, e, y, options.temperature, stats, loss, pairs);
  if (autograd::needs_grad(e))
    autograd::record(kOp, {e}, loss,
                     [es = autograd::save(e), y, stats, pairs, tiles, t = options.temperature](
                         const Tensor& grad) -> autograd::TensorList {
                       const Tensor& e = es.get("ntxent_loss");
                       Tensor de = Tensor::empty(e.shape(), e.options());
                       ntxent_backward_kernel(e.device(), tiles, grad.contiguous(), e, y, t, stats, pairs, de);
                       return {de};
                     });
  return loss;
}

}  // namespace ember
