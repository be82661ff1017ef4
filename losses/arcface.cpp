#include "losses/arcface.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "losses/metric_common.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/kernels.h"
#include "ops/metric_rules.h"
#include "ops/padded_rows.h"

namespace ember {

Tensor arcface_loss(const Tensor& embeddings, const Tensor& labels, const Tensor& W, ArcFaceOptions options) {
  constexpr const char* kOp = "arcface_loss";
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(arcface_loss(widened(embeddings), labels, widened(W), options), embeddings.dtype());
  check_embeddings(kOp, embeddings, labels);
  check_class_weights(kOp, "W", W, /*embedding_dim=*/0, embeddings);
  EMBER_CHECK(options.scale > 0, kOp, ": expected scale > 0, got ", options.scale);
  const double margin = options.margin_degrees * (kArcFacePi / 180);  // np.radians
  const Tensor e = normalize_rows(embeddings);
  // PML normalises W's columns; they stay columns (Note [Class weights as columns] in
  // ops/cpu/cross_operand.h), rows padded, and dw gets w's strides.
  const Tensor w = normalize_columns(W);
  const Tensor y = labels.contiguous();
  const PairTiles tiles = pair_tiles();
  const Tensor stats = Tensor::empty({e.size(0)}, {.dtype = DType::f64, .device = e.device()});
  Tensor loss = Tensor::empty({}, e.options());
  // The forward computes the gradient when one will be wanted (Note [Gradient in the forward]).
  // Only the gradients wanted: frozen class weights or embeddings skip theirs (on the CPU).
  const bool wants_grad = autograd::needs_grad({e, w});
  Tensor de = autograd::needs_grad(e) ? Tensor::empty(e.shape(), e.options()) : Tensor();
  Tensor dw = autograd::needs_grad(w) ? empty_padded_rows(w.size(0), w.size(1), w.options()) : Tensor();
  arcface_forward_kernel(e.device(), tiles, e, w, y, margin, options.scale, stats, loss, de, dw);
  if (wants_grad)
    autograd::record(kOp, {e, w}, loss, [de, dw](const Tensor& grad) mutable -> autograd::TensorList {
      return {scaled_forward_gradient(de, grad), scaled_forward_gradient(dw, grad)};
    });
  return loss;
}

ArcFaceLoss::ArcFaceLoss(int64_t num_classes, int64_t embedding_size, ArcFaceOptions options, Generator* gen)
    : Module("ArcFaceLoss"), num_classes_(num_classes), options_(options) {
  EMBER_CHECK(num_classes > 0 && embedding_size > 0,
              "ArcFaceLoss: expected positive num_classes and embedding_size, got ", num_classes, " and ",
              embedding_size);
  W_ = register_parameter("W", empty({embedding_size, num_classes}));
  init::normal_(W_, 0.0, 1.0, gen);
}

Tensor ArcFaceLoss::operator()(const Tensor& embeddings, const Tensor& labels) {
  return arcface_loss(embeddings, labels, W_.to(embeddings.dtype()), options_);
}

Tensor ArcFaceLoss::forward(const Tensor&) {
  EMBER_FAIL("ArcFaceLoss: a loss needs labels: call loss(embeddings, labels)");
}

}  // namespace ember
