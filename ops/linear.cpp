#include "ops/linear.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  EMBER_CHECK(x.defined() && w.defined(), "linear: expected defined input and weight");
  if (autocast_dtype() && (x.dtype() == DType::f32 || w.dtype() == DType::f32))  // Note [Autocast policy]
    return linear(autocast_low(x), autocast_low(w), autocast_low(b), act);
  EMBER_CHECK(is_floating(x.dtype()), "linear: expected a floating input, got ", dtype_name(x.dtype()));
  check_same_dtype("linear", x, w);
  check_same_device("linear", x, w);
  if (is_reduced_float(x.dtype()) && !native_reduced_gemm(x)) {  // f32 GEMM on the widened operands, rounded once
    const AutocastGuard f32_inside(DType::f32);
    return narrowed(linear(x.to(DType::f32), w.to(DType::f32), widened(b), act), x.dtype());
  }
  EMBER_CHECK(x.dim() >= 1, "linear: expected an input of shape (..., in), got a 0-d tensor");
  EMBER_CHECK(w.dim() == 2 && w.size(1) == x.size(-1), "linear: expected a weight of shape (out, ", x.size(-1),
              ") for input ", shape_str(x.shape()), ", got ", shape_str(w.shape()));
  const int64_t in = w.size(1), out = w.size(0);
  if (b.defined()) {
    check_same_dtype("linear", x, b);
    check_same_device("linear", x, b);
    EMBER_CHECK(b.dim() == 1 && b.size(0) == out, "linear: expected a bias of shape ", shape_str({out}), ", got ",
                shape_str(b.shape()));
  }
  Shape out_shape = x.shape();
  out_shape.back() = out;
  const int64_t m = numel_of(Shape(x.shape().begin(), x.shape().end() - 1));  // rows of the GEMM
  Tensor y = Tensor::empty({m, out}, x.options());
  {
    // The kernel's operands are made without recording: a copy or view recorded here would be a
    // graph node that nothing consumes (the node below records x, w and b themselves; Note
    // [Per-op overhead] counts them).
    const autograd::NoGradGuard untracked;
    linear_forward_kernel(x.device(), x.contiguous().reshape({m, in}), w.contiguous(),
                          b.defined() ? b.contiguous() : Tensor(), act, y);
  }
  y = y.view(out_shape);
  if (needs_grad({x, w, b})) {
    const bool nx = needs_grad(x), nw = needs_grad(w), nb = needs_grad(b);
    const bool activated = act != Activation::none;
    record(activated ? "linear_act" : "linear", {x, w, b}, y,
           [sx = save(nw ? x : Tensor()), sw = save(nx ? w : Tensor()), sy = save(activated ? y : Tensor()), act, m,
            in, out, xs = x.shape(), nx, nw, nb](Tensor dy) mutable -> TensorList {
             // dy is handed over (dy2d its only handle), so dz may reuse its buffer, and the saved
             // output is taken: neither stays live through the GEMMs (Note [Donated gradients]).
             Tensor y2d = act == Activation::none ? Tensor() : sy.take("linear").reshape({m, out});
             Tensor dy2d = dy.reshape({m, out});
             dy = Tensor();
             const auto [g, db] = bias_activation_backward(std::move(dy2d), y2d, act, 1, nb);
             y2d = Tensor();
             return {nx ? matmul(g, sw.get("linear")).reshape(xs) : Tensor(),
                     nw ? matmul(g.t(), sx.get("linear").reshape({m, in})) : Tensor(), db};
           });
  }
  return y;
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b, Activation::relu); }

}  // namespace ember
