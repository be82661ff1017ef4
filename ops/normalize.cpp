#include "ops/normalize.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/kernels.h"
#include "ops/padded_rows.h"
#include "ops/reduced_precision.h"

namespace ember {
namespace {

constexpr double kNormalizeEps = 1e-12;  // PML's (torch.nn.functional.normalize's default)

void check_normalized_matrix(const char* op, const Tensor& x) {
  EMBER_CHECK(x.dim() == 2, op, ": expected a 2-D x, got shape ", shape_str(x.shape()));
  EMBER_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, op, ": expected an f32 or f64 x, got ",
              dtype_name(x.dtype()));
}

}  // namespace

// Note [Fused row normalisation]: normalize_rows was div(x, clamp(norm(x), eps)), six recorded
// ops whose backward allocated about six x-sized temporaries (the division's two products and
// its negation, the norm's quotient, select and product, the sum of the two branches); for the
// class losses, whose x is the whole weight matrix W, they were most of a step's peak memory.
// One kernel pass now writes y (contiguous whatever x's strides, so the losses need no copy) and
// the row norms n; the backward is the composite's, term for term and rounded as it was:
//   dx = g / d + c y,   d = max(n, eps),   c = -sum(g / d * y) where n >= eps, else 0
// (the division's two branches; the clamp passes the norm's gradient only at n >= eps, and there
// x / n is y, so the norm's branch is c y). It saves y, which the loss saves anyway, and n, and
// writes dx into the incoming gradient when that is the only reference to it (Note [Donated
// gradients] in ops/activation.h), so it needs no x-sized buffer of its own.
Tensor normalize_rows(const Tensor& x) {
  constexpr const char* kOp = "normalize_rows";
  if (is_reduced_float(x.dtype())) return float_op_result(normalize_rows(widened(x)), x.dtype());
  check_normalized_matrix(kOp, x);
  Tensor y = Tensor::empty(x.shape(), x.options());
  const Tensor norms = Tensor::empty({x.size(0)}, x.options());
  normalize_rows_forward_kernel(x.device(), x, kNormalizeEps, y, norms);
  if (autograd::needs_grad(x))
    autograd::record(kOp, {x}, y, [sy = autograd::save(y), norms](Tensor grad) -> autograd::TensorList {
      const bool donated = grad.is_contiguous() && grad.is_exclusive();  // Note [Donated gradients]
      Tensor dx = donated ? grad : Tensor::empty(grad.shape(), grad.options());
      normalize_rows_backward_kernel(grad.device(), grad.contiguous(), sy.get(kOp), norms, kNormalizeEps, dx);
      return {dx};
    });
  return y;
}

// The same for columns (Note [Fused row normalisation] down each column). y's rows are padded
// (Note [Padded rows]); a gradient arriving with another column stride than 1 is made contiguous
// first. dx overwrites the gradient where nothing else holds it and its rows do not overlap, in
// its layout (ArcFace's dw has y's): the leaf's accumulation then makes the one contiguous copy
// that W.grad needs, after y was released, instead of a third matrix beside the gradient and y.
Tensor normalize_columns(const Tensor& x) {
  constexpr const char* kOp = "normalize_columns";
  if (is_reduced_float(x.dtype())) return float_op_result(normalize_columns(widened(x)), x.dtype());
  check_normalized_matrix(kOp, x);
  Tensor y = empty_padded_rows(x.size(0), x.size(1), x.options());
  const Tensor norms = Tensor::empty({x.size(1)}, x.options());
  normalize_columns_forward_kernel(x.device(), x.contiguous(), kNormalizeEps, y, norms);
  if (autograd::needs_grad(x))
    autograd::record(kOp, {x}, y, [sy = autograd::save(y), norms](Tensor grad) -> autograd::TensorList {
      if (grad.stride(1) != 1) grad = grad.contiguous();
      // Note [Donated gradients], in grad's layout where its rows do not overlap (sum(0)'s
      // gradient is one row broadcast: stride 0).
      const bool donated = grad.stride(0) >= grad.size(1) && grad.is_exclusive();
      Tensor dx = donated ? grad : Tensor::empty(grad.shape(), grad.options());
      normalize_columns_backward_kernel(grad.device(), grad, sy.get(kOp), norms, kNormalizeEps, dx);
      return {dx};
    });
  return y;
}

}  // namespace ember
