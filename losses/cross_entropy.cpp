#include "losses/cross_entropy.h"

#include "autograd/autograd.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

// Inputs (N, C, d1, ...) and targets (N, d1, ...) seen by the kernels as (N, C, S) and (N, S).
struct ClassRows {
  Tensor input;      // (N, C, S) contiguous
  Tensor target;     // (N, S) contiguous i64
  Shape row_shape;   // the target's shape: the shape of the unreduced loss
};

ClassRows class_rows(const char* op, const Tensor& input, const Tensor& target) {
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected floating scores, got ", dtype_name(input.dtype()));
  EMBER_CHECK(target.dtype() == DType::i64, op, ": expected class indices of dtype i64 as target, got ",
              dtype_name(target.dtype()));
  check_same_device(op, input, target);
  EMBER_CHECK(input.dim() >= 1, op, ": expected scores of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor");
  Shape expected;  // the target shape that matches the input
  if (input.dim() >= 2) {
    expected.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  }
  EMBER_CHECK(target.shape() == expected, op, ": expected target of shape ", shape_str(expected), " for scores ",
              shape_str(input.shape()), ", got ", shape_str(target.shape()));
  const int64_t N = input.dim() >= 2 ? input.size(0) : 1, C = input.dim() >= 2 ? input.size(1) : input.size(0);
  const int64_t S = N * C == 0 ? numel_of(expected) / std::max<int64_t>(N, 1) : input.numel() / (N * C);
  EMBER_CHECK(C > 0, op, ": expected at least one class, got scores ", shape_str(input.shape()));
  const Tensor in = input.contiguous(), t = target.contiguous();
  return {Tensor::view_of(in, {N, C, S}, {C * S, S, 1}, in.offset()),
          Tensor::view_of(t, {N, S}, {S, 1}, t.offset()), expected};
}

// The loss from per-row losses (differentiable) and the number of rows that count (0-d).
Tensor reduce_rows(const Tensor& rows, const Tensor& count, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return rows;
    case Reduction::sum: return sum(rows);
    case Reduction::mean: return div(sum(rows), count);
  }
  return rows;
}

// grad of the row losses as (N, S) for the kernels (a broadcast grad stays a stride-0 view).
Tensor grad_rows(const Tensor& grad, const Tensor& target2) {
  return grad.reshape(target2.shape());
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, double label_smoothing,
                     int64_t ignore_index) {
  EMBER_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
              "cross_entropy: expected 0 <= label_smoothing <= 1, got ", label_smoothing);
  ClassRows r = class_rows("cross_entropy", logits, target);
  const TensorOptions opt = logits.options();
  Tensor losses = Tensor::empty(r.row_shape, opt), count = Tensor::empty({}, opt);
  Tensor lse = Tensor::empty(r.row_shape, {.dtype = DType::f64, .device = logits.device()});
  cross_entropy_forward_kernel(logits.device(), r.input, r.target, label_smoothing, ignore_index,
                               losses.view(r.target.shape()), lse.view(r.target.shape()), count);
  if (needs_grad(logits))
    record("cross_entropy", {logits}, losses,
           [sx = save(r.input), st = save(r.target), sl = save(lse), shape = logits.shape(), label_smoothing,
            ignore_index](const Tensor& g) -> TensorList {
             const char* op = "cross_entropy";
             const Tensor& t2 = st.get(op);
             Tensor d = cross_entropy_backward(grad_rows(g, t2), sx.get(op), t2, sl.get(op).view(t2.shape()),
                                               label_smoothing, ignore_index);
             return {d.view(shape)};
           });
  return reduce_rows(losses, count, reduction);
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                              double label_smoothing, int64_t ignore_index) {
  const char* op = "cross_entropy_backward";
  ClassRows r = class_rows(op, logits, target);
  EMBER_CHECK(grad.shape() == r.row_shape && lse.shape() == r.row_shape, op, ": expected grad and lse of shape ",
              shape_str(r.row_shape), ", got ", shape_str(grad.shape()), " and ", shape_str(lse.shape()));
  check_same_dtype(op, grad, logits);
  EMBER_CHECK(lse.dtype() == DType::f64, op, ": expected lse of dtype f64, got ", dtype_name(lse.dtype()));
  Tensor d = Tensor::empty(r.input.shape(), logits.options());
  cross_entropy_backward_kernel(logits.device(), grad.reshape(r.target.shape()), r.input, r.target,
                                lse.contiguous().view(r.target.shape()), label_smoothing, ignore_index, d);
  return d.view(logits.shape());
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  ClassRows r = class_rows("nll_loss", log_probs, target);
  const TensorOptions opt = log_probs.options();
  Tensor losses = Tensor::empty(r.row_shape, opt), count = Tensor::empty({}, opt);
  nll_loss_forward_kernel(log_probs.device(), r.input, r.target, ignore_index, losses.view(r.target.shape()), count);
  if (needs_grad(log_probs))
    record("nll_loss", {log_probs}, losses,
           [st = save(r.target), shape = r.input.shape(), in_shape = log_probs.shape(),
            ignore_index](const Tensor& g) -> TensorList {
             const Tensor& t2 = st.get("nll_loss");
             Tensor d = Tensor::empty(shape, g.options());
             nll_loss_backward_kernel(g.device(), grad_rows(g, t2), t2, ignore_index, d);
             return {d.view(in_shape)};
           });
  return reduce_rows(losses, count, reduction);
}

}  // namespace ember
