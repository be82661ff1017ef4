#include "losses/proxy_anchor.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "losses/metric_common.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/kernels.h"

namespace ember {

Tensor proxy_anchor_loss(const Tensor& embeddings, const Tensor& labels, const Tensor& proxies,
                         ProxyAnchorOptions options) {
  constexpr const char* kOp = "proxy_anchor_loss";
  if (is_reduced_float(embeddings.dtype())) return float_op_result(proxy_anchor_loss(widened(embeddings), labels, widened(proxies), options), embeddings.dtype());
  check_embeddings(kOp, embeddings, labels);
  check_class_weights(kOp, "proxies", proxies, /*embedding_dim=*/1, embeddings);
  const Tensor e = normalize_rows(embeddings);
  const Tensor p = normalize_rows(proxies);
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const TensorOptions f64{.dtype = DType::f64, .device = e.device()};
  const Tensor stats = Tensor::empty({p.size(0), 2}, f64);
  const Tensor present = Tensor::empty({}, f64);
  Tensor loss = Tensor::empty({}, e.options());
  proxy_anchor_forward_kernel(e.device(), tiles, e, p, y, options.margin, options.alpha, stats, present, loss);
  if (autograd::needs_grad({e, p}))
    autograd::record(kOp, {e, p}, loss,
                     [es = autograd::save(e), ps = autograd::save(p), y, stats, present, tiles, o = options](
                         const Tensor& grad) -> autograd::TensorList {
                       const Tensor& e = es.get("proxy_anchor_loss");
                       const Tensor& p = ps.get("proxy_anchor_loss");
                       Tensor de = Tensor::empty(e.shape(), e.options());
                       Tensor dp = Tensor::empty(p.shape(), p.options());
                       proxy_anchor_backward_kernel(e.device(), tiles, grad.contiguous(), e, p, y, o.margin, o.alpha,
                                                    stats, present, de, dp);
                       return {de, dp};
                     });
  return loss;
}

ProxyAnchorLoss::ProxyAnchorLoss(int64_t num_classes, int64_t embedding_size, ProxyAnchorOptions options,
                                 Generator* gen)
    : Module("ProxyAnchorLoss"), num_classes_(num_classes), options_(options) {
  EMBER_CHECK(num_classes > 0 && embedding_size > 0,
              "ProxyAnchorLoss: expected positive num_classes and embedding_size, got ", num_classes, " and ",
              embedding_size);
  proxies_ = register_parameter("proxies", empty({num_classes, embedding_size}));
  init::kaiming_normal_(proxies_, 0.0, init::FanMode::fan_out, "leaky_relu", gen);
}

Tensor ProxyAnchorLoss::operator()(const Tensor& embeddings, const Tensor& labels) {
  return proxy_anchor_loss(embeddings, labels, proxies_.to(embeddings.dtype()), options_);
}

Tensor ProxyAnchorLoss::forward(const Tensor&) {
  EMBER_FAIL("ProxyAnchorLoss: a loss needs labels: call loss(embeddings, labels)");
}

}  // namespace ember
