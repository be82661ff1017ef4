#include "losses/triplet.h"

#include "autograd/graph.h"
#include "losses/metric_common.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {
namespace {

constexpr const char* kOp = "triplet_margin_loss";

// Given triplets: three defined (T) i64 tensors on the embeddings' device, each index in [0, B).
// Note [Checked indices]: the range check reads the indices on the host (a copy, and a
// synchronisation for cuda indices); an index out of range would otherwise read outside e.
void check_triplets(const Triplets& t, const Tensor& embeddings) {
  const struct {
    const char* name;
    const Tensor& index;
  } parts[] = {{"anchor", t.anchor}, {"positive", t.positive}, {"negative", t.negative}};
  for (const auto& p : parts) {
    EMBER_CHECK(p.index.defined(), kOp, ": expected ", p.name, " indices, got an undefined tensor");
    EMBER_CHECK(p.index.dtype() == DType::i64, kOp, ": expected ", p.name, " indices of dtype i64, got ",
                dtype_name(p.index.dtype()));
    EMBER_CHECK(p.index.dim() == 1, kOp, ": expected ", p.name, " indices of shape (T), got ",
                shape_str(p.index.shape()));
    check_same_device(kOp, embeddings, p.index);
  }
  EMBER_CHECK(t.anchor.size(0) == t.positive.size(0) && t.anchor.size(0) == t.negative.size(0), kOp,
              ": expected anchor, positive and negative indices of one length, got ", t.anchor.size(0), ", ",
              t.positive.size(0), " and ", t.negative.size(0));
  const int64_t B = embeddings.size(0);
  for (const auto& p : parts) {
    const Tensor host = p.index.cpu().contiguous();
    const int64_t* v = host.data<int64_t>();
    for (int64_t k = 0; k < host.numel(); ++k)
      EMBER_CHECK(v[k] >= 0 && v[k] < B, kOp, ": expected ", p.name, " indices in [0, ", B, "), got ", v[k],
                  " at position ", k);
  }
}

}  // namespace

Tensor triplet_margin_loss(const Tensor& embeddings, const Tensor& labels, TripletOptions options) {
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(triplet_margin_loss(widened(embeddings), labels, options), embeddings.dtype());
  const PairLossInputs in = pair_loss_inputs(kOp, embeddings, labels, Shape{});
  const Tensor triplets = in.counted;
  Tensor loss = Tensor::empty({}, in.e.options());
  // The forward computes the gradient of the terms' sum when one will be wanted (Note [Gradient
  // in the forward] in ops/cpu/triplet_tiled.cpp); the backward scales it by grad / triplets.
  Tensor term_grad = autograd::needs_grad(in.e) ? Tensor::empty(in.e.shape(), in.e.options()) : Tensor();
  triplet_forward_kernel(in.e.device(), in.tiles, in.e, in.labels, options.margin, in.poison, loss, triplets,
                         term_grad);
  return record_pair_loss(kOp, in, loss, [=](const Tensor& grad, const Tensor&) mutable {
    // d loss / de = grad / triplets G; G is 0 without triplets.
    return scaled_forward_gradient(term_grad, div(grad.to(DType::f64), maximum(triplets, 1.0)));  // in f64
  });
}

Tensor triplet_margin_loss(const Tensor& embeddings, const Tensor& labels, const Triplets& mined,
                           TripletOptions options) {
  check_triplets(mined, embeddings);
  if (is_reduced_float(embeddings.dtype()))
    return float_op_result(triplet_margin_loss(widened(embeddings), labels, mined, options), embeddings.dtype());
  const PairLossInputs in = pair_loss_inputs(kOp, embeddings, labels, Shape{});
  const Tensor a = mined.anchor.contiguous(), p = mined.positive.contiguous(), n = mined.negative.contiguous();
  const TensorOptions f64{.dtype = DType::f64, .device = in.e.device()};
  const Tensor dists = Tensor::empty({a.size(0), 2}, f64), triplets = in.counted;
  Tensor loss = Tensor::empty({}, in.e.options());
  triplet_mined_forward_kernel(in.e.device(), in.e, a, p, n, options.margin, in.poison, dists, loss, triplets);
  return record_pair_loss(kOp, in, loss, [=, m = options.margin](const Tensor& grad, const Tensor& e) {
    Tensor de = Tensor::empty(e.shape(), e.options());
    triplet_mined_backward_kernel(e.device(), grad, e, a, p, n, m, dists, triplets, de);
    return de;
  });
}

}  // namespace ember
