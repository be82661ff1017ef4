#include "ops/scale_add_relu.h"

#include <initializer_list>
#include <string>

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

namespace {

// t contiguous (N, C, H, W) viewed as the kernels' (N, C, S).
Tensor as_planes(const Tensor& t) { return t.view({t.size(0), t.size(1), t.size(2) * t.size(3)}); }

struct Named {
  const char* name;
  const Tensor& tensor;
};

// The shape contract shared by the op and its backward: x (N, C, H, W), scale (N, C), every
// tensor of `like_x` of x's shape; one floating dtype and device. Errors name `op` and every shape.
void check_operands(const char* op, const Tensor& x, const Tensor& scale, std::initializer_list<Named> like_x) {
  std::string shapes = " (x " + (x.defined() ? shape_str(x.shape()) : "undefined");
  shapes += ", scale " + (scale.defined() ? shape_str(scale.shape()) : "undefined");
  for (const Named& t : like_x)
    shapes += std::string(", ") + t.name + " " + (t.tensor.defined() ? shape_str(t.tensor.shape()) : "undefined");
  shapes += ")";
  bool defined = x.defined() && scale.defined();
  for (const Named& t : like_x) defined = defined && t.tensor.defined();
  EMBER_CHECK(defined, op, ": expected defined tensors, got", shapes);
  EMBER_CHECK(x.dim() == 4, op, ": expected x of rank 4 (N, C, H, W), got", shapes);
  for (const Named& t : like_x)
    EMBER_CHECK(t.tensor.shape() == x.shape(), op, ": expected ", t.name, " of x's shape, got", shapes);
  const Shape per_channel{x.size(0), x.size(1)};
  EMBER_CHECK(scale.shape() == per_channel, op, ": expected scale of shape (N, C) = ", shape_str(per_channel),
              ", got", shapes);
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating x, got ", dtype_name(x.dtype()));
  check_same_dtype(op, x, scale);
  check_same_device(op, x, scale);
  for (const Named& t : like_x) {
    check_same_dtype(op, x, t.tensor);
    check_same_device(op, x, t.tensor);
  }
}

}  // namespace

Tensor scale_add_relu(const Tensor& x, const Tensor& scale, const Tensor& residual) {
  if (Tensor px = x, ps = scale, pr = residual; autocast_promote(px, ps, pr))  // Note [Autocast policy]
    return scale_add_relu(px, ps, pr);
  // bf16/f16: native on the CPU when all three share x's dtype (computed in f32, y rounded once:
  // the widened computation's y, bit for bit), widened elsewhere, on CUDA and for mixed dtypes.
  const bool defined = x.defined() && scale.defined() && residual.defined();  // else check_operands says so
  const bool native_16_bit =
      defined && x.device().is_cpu() && scale.dtype() == x.dtype() && residual.dtype() == x.dtype();
  if (defined && is_reduced_float(x.dtype()) && !native_16_bit)
    return narrowed(scale_add_relu(widened(x), widened(scale), widened(residual)), x.dtype());
  check_operands("scale_add_relu", x, scale, {{"residual", residual}});
  const Tensor xc = x.contiguous(), sc = scale.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.options());
  scale_add_relu_forward_kernel(x.device(), as_planes(xc), sc, as_planes(residual.contiguous()), as_planes(y));
  if (needs_grad({x, scale, residual})) {
    const bool nx = needs_grad(x), ns = needs_grad(scale), nr = needs_grad(residual);
    // In the SE block scale always needs its gradient, hence x, and x and y are kept anyway.
    record("scale_add_relu", {x, scale, residual}, y,
           [sx = save(xc), ss = save(sc), sy = save(y), nx, ns, nr](const Tensor& g) -> TensorList {
             const char* op = "scale_add_relu";
             const ScaleAddReluGrad d = scale_add_relu_backward(g, sy.get(op), sx.get(op), ss.get(op), nx, ns, nr);
             return {d.x, d.scale, d.residual};
           });
  }
  return y;
}

ScaleAddReluGrad scale_add_relu_backward(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale,
                                         bool need_dx, bool need_dscale, bool need_dresidual) {
  const char* op = "scale_add_relu_backward";
  check_operands(op, x, scale, {{"grad", grad}, {"y", y}});
  ScaleAddReluGrad d;
  if (need_dx) d.x = Tensor::empty(x.shape(), x.options());
  if (need_dscale) d.scale = Tensor::empty(scale.shape(), x.options());
  if (need_dresidual) d.residual = Tensor::empty(x.shape(), x.options());
  if (!need_dx && !need_dscale && !need_dresidual) return d;
  auto planes_or_none = [](const Tensor& t) { return t.defined() ? as_planes(t) : Tensor(); };
  scale_add_relu_backward_kernel(x.device(), as_planes(grad.contiguous()), as_planes(y.contiguous()),
                                 as_planes(x.contiguous()), scale.contiguous(), planes_or_none(d.x), d.scale,
                                 planes_or_none(d.residual));
  return d;
}

}  // namespace ember
