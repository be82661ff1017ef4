#include "ops/dropout.h"

#include "autograd/graph.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

namespace {

// Applies the mask of (gen, first_block) to t (the forward on x, the backward on the gradient).
Tensor apply_mask(const Tensor& t, const Generator& gen, uint64_t first_block, double p) {
  const Tensor tc = t.contiguous();
  Tensor y = Tensor::empty(t.shape(), t.options());
  dropout_kernel(t.device(), tc, gen, first_block, p, y);
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  EMBER_CHECK(p >= 0 && p <= 1, "dropout: expected a probability 0 <= p <= 1, got ", p);
  EMBER_CHECK(is_floating(x.dtype()), "dropout: expected a floating tensor, got ", dtype_name(x.dtype()));
  if (!training || p == 0) return x;
  if (is_reduced_float(x.dtype())) return narrowed(dropout(widened(x), p, training, gen), x.dtype());
  if (p == 1) return mul(x, 0.0);  // recorded by mul: the gradient is zero too
  Generator& g = gen ? *gen : default_generator();
  const uint64_t first_block = g.reserve(uint64_t((x.numel() + 3) / 4));
  const Generator state = g;  // the seed the mask comes from (the offset is first_block)
  Tensor y = apply_mask(x, state, first_block, p);
  if (autograd::needs_grad(x))
    autograd::record("dropout", {x}, y, [state, first_block, p](const Tensor& grad) -> autograd::TensorList {
      return {apply_mask(grad, state, first_block, p)};
    });
  return y;
}

}  // namespace ember
