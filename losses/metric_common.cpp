#include "losses/metric_common.h"

#include "autograd/graph.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

void check_embeddings(const char* op, const Tensor& embeddings, const Tensor& labels) {
  EMBER_CHECK(embeddings.dim() == 2, op, ": expected embeddings of shape (B, D), got ",
              shape_str(embeddings.shape()));
  EMBER_CHECK(embeddings.dtype() == DType::f32 || embeddings.dtype() == DType::f64, op,
              ": expected f32 or f64 embeddings, got ", dtype_name(embeddings.dtype()));
  EMBER_CHECK(labels.dtype() == DType::i64, op, ": expected labels of dtype i64, got ", dtype_name(labels.dtype()));
  EMBER_CHECK(labels.dim() == 1 && labels.size(0) == embeddings.size(0), op, ": expected labels of shape (",
              embeddings.size(0), ") for embeddings ", shape_str(embeddings.shape()), ", got ",
              shape_str(labels.shape()));
  check_same_device(op, embeddings, labels);
}

void check_class_weights(const char* op, const char* name, const Tensor& weights, int64_t embedding_dim,
                         const Tensor& embeddings) {
  const char* layout = embedding_dim == 0 ? "(D, C)" : "(C, D)";
  EMBER_CHECK(weights.dim() == 2, op, ": expected ", name, " of shape ", layout, ", got ", shape_str(weights.shape()));
  EMBER_CHECK(weights.size(embedding_dim) == embeddings.size(1), op, ": expected ", name, " of shape ", layout,
              " with D = ", embeddings.size(1), " (the embeddings' size), got ", shape_str(weights.shape()));
  EMBER_CHECK(weights.size(1 - embedding_dim) >= 1, op, ": expected ", name, " with at least one class, got ",
              shape_str(weights.shape()));
  EMBER_CHECK(weights.dtype() == embeddings.dtype(), op, ": expected ", name, " of dtype ",
              dtype_name(embeddings.dtype()), " like the embeddings, got ", dtype_name(weights.dtype()));
  check_same_device(op, embeddings, weights);
}

Tensor nonfinite_poison(const Tensor& embeddings) {
  const Tensor x = embeddings.contiguous();
  Tensor poison = Tensor::empty({}, x.options());
  nonfinite_poison_kernel(x.device(), x, poison);
  return poison;
}

namespace {

// x itself in the forward; the backward passes grad + poison while some term is counted, else 0
// (PML's zero_loss: its gradient never meets the NaN of normalising a non-finite row), in one
// pass on the device (no host read). Note [Non-finite embeddings] in ops/metric_rules.h: the
// poison makes every element NaN when a row is non-finite and some term kept, as cdist / matmul
// do in PyTorch; it is 0 otherwise, leaving finite gradients unchanged.
Tensor zero_loss_gate(const Tensor& x, const Tensor& counted, const Tensor& poison) {
  if (!autograd::needs_grad(x)) return x;
  Tensor out = x.detach();
  autograd::record("metric_loss_zero_loss_gate", {x}, out,
                   [counted, poison](const Tensor& grad) -> autograd::TensorList {
                     const Tensor g = grad.contiguous();
                     Tensor dx = Tensor::empty(g.shape(), g.options());
                     zero_loss_gate_kernel(g.device(), g, counted, poison, dx);
                     return {dx};
                   });
  return out;
}

}  // namespace

PairLossInputs pair_loss_inputs(const char* op, const Tensor& embeddings, const Tensor& labels,
                                std::optional<Shape> counted_shape) {
  check_embeddings(op, embeddings, labels);
  const Tensor counted =
      counted_shape ? Tensor::empty(*counted_shape, {.dtype = DType::f64, .device = embeddings.device()}) : Tensor();
  const Tensor poison = nonfinite_poison(embeddings);
  const Tensor x = counted.defined() ? zero_loss_gate(embeddings, counted, poison) : embeddings;
  return {normalize_rows(x), labels.contiguous(), pair_tiles(), poison, counted};
}

Tensor record_pair_loss(const char* op, const PairLossInputs& in, Tensor loss, PairLossBackward backward) {
  if (autograd::needs_grad(in.e))
    autograd::record(op, {in.e}, loss,
                     [op, es = autograd::save(in.e), backward = std::move(backward)](
                         const Tensor& grad) -> autograd::TensorList {
                       return {backward(grad.contiguous(), es.get(op))};
                     });
  return loss;
}

Tensor scaled_forward_gradient(Tensor& G, const Tensor& grad) {
  if (!G.defined()) return Tensor();
  if (!grad.device().is_cpu() || autograd::retaining_graph()) return mul(G, grad.to(G.dtype()));
  Tensor scaled = std::move(G);
  G = Tensor();
  scaled.mul_(grad.item());
  return scaled;
}

}  // namespace ember
