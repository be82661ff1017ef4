#include "ops/normalize.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/kernels.h"
#include "ops/reduced_precision.h"

namespace ember {

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
  constexpr double kEps = 1e-12;
  if (is_reduced_float(x.dtype())) return float_op_result(normalize_rows(widened(x)), x.dtype());
  EMBER_CHECK(x.dim() == 2, kOp, ": expected x of shape (R, D), got ", shape_str(x.shape()));
  EMBER_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, kOp, ": expected an f32 or f64 x, got ",
              dtype_name(x.dtype()));
  Tensor y = Tensor::empty(x.shape(), x.options());
  const Tensor norms = Tensor::empty({x.size(0)}, x.options());
  normalize_rows_forward_kernel(x.device(), x, kEps, y, norms);
  if (autograd::needs_grad(x))
    autograd::record(kOp, {x}, y, [sy = autograd::save(y), norms](Tensor grad) -> autograd::TensorList {
      const bool donated = grad.is_contiguous() && grad.is_exclusive();  // Note [Donated gradients]
      Tensor dx = donated ? grad : Tensor::empty(grad.shape(), grad.options());
      normalize_rows_backward_kernel(grad.device(), grad.contiguous(), sy.get(kOp), norms, kEps, dx);
      return {dx};
    });
  return y;
}

}  // namespace ember
