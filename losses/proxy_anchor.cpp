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
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(proxy_anchor_loss(widened(embeddings), labels, widened(proxies), options),
                           embeddings.dtype());
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
  // The forward computes the gradient when one will be wanted (Note [Gradient in the forward]).
  // Only the gradients wanted: frozen class weights or embeddings skip theirs (on the CPU).
  const bool wants_grad = autograd::needs_grad({e, p});
  Tensor de = autograd::needs_grad(e) ? Tensor::empty(e.shape(), e.options()) : Tensor();
  Tensor dp = autograd::needs_grad(p) ? Tensor::empty(p.shape(), p.options()) : Tensor();
  proxy_anchor_forward_kernel(e.device(), tiles, e, p, y, options.margin, options.alpha, stats, present, loss, de,
                              dp);
  if (wants_grad)
    autograd::record(kOp, {e, p}, loss, [de, dp](const Tensor& grad) mutable -> autograd::TensorList {
      return {scaled_forward_gradient(de, grad), scaled_forward_gradient(dp, grad)};
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
