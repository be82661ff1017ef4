#include "losses/supcon.h"

#include "autograd/graph.h"
#include "losses/metric_common.h"
#include "ops/kernels.h"

namespace ember {

Tensor supcon_loss(const Tensor& embeddings, const Tensor& labels, SupConOptions options) {
  constexpr const char* kOp = "supcon_loss";
  check_embeddings(kOp, embeddings, labels);
  EMBER_CHECK(options.temperature > 0, kOp, ": expected temperature > 0, got ", options.temperature);
  const Tensor e = normalize_rows(embeddings).contiguous();
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const TensorOptions f64{.dtype = DType::f64, .device = e.device()};
  const Tensor stats = Tensor::empty({e.size(0), 3}, f64);
  const Tensor anchors = Tensor::empty({}, f64);
  Tensor loss = Tensor::empty({}, e.options());
  supcon_forward_kernel(e.device(), tiles, e, y, options.temperature, stats, loss, anchors);
  if (autograd::needs_grad(e))
    autograd::record(kOp, {e}, loss,
                     [es = autograd::save(e), y, stats, anchors, tiles, t = options.temperature](
                         const Tensor& grad) -> autograd::TensorList {
                       const Tensor& e = es.get("supcon_loss");
                       Tensor de = Tensor::empty(e.shape(), e.options());
                       supcon_backward_kernel(e.device(), tiles, grad.contiguous(), e, y, t, stats, anchors, de);
                       return {de};
                     });
  return loss;
}

}  // namespace ember
