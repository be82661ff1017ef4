// The autograd half of Tensor's methods (see core/tensor.h); backward() is the engine's
// (autograd/engine.cpp).
#include "autograd/graph.h"

namespace ember {

using autograd::AutogradMeta;

AutogradMeta& Tensor::ensure_autograd_meta() const {
  auto& slot = impl().autograd;
  if (!slot) slot = std::make_shared<AutogradMeta>();
  return *slot;
}

bool Tensor::requires_grad() const {
  const AutogradMeta* m = autograd_meta();
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool enabled) {
  AutogradMeta* m = autograd_meta();
  EMBER_CHECK(!(m && m->grad_fn), "requires_grad_: only leaf tensors can change requires_grad; "
              "this one is the output of '", m ? m->grad_fn->name : "", "' (use detach())");
  EMBER_CHECK(!enabled || is_floating(dtype()), "requires_grad_: only floating tensors can require "
              "grad, got ", dtype_name(dtype()));
  if (enabled || m) ensure_autograd_meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* m = autograd_meta();
  return !m || !m->grad_fn;
}

Tensor Tensor::grad() const {
  const AutogradMeta* m = autograd_meta();
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  EMBER_CHECK(!grad.defined() || grad.shape() == shape(), "set_grad: gradient shape ",
              shape_str(grad.shape()), " does not match tensor shape ", shape_str(shape()));
  ensure_autograd_meta().grad = grad;
}

void Tensor::zero_grad() const {
  if (AutogradMeta* m = autograd_meta()) m->grad = Tensor();
}

Tensor Tensor::detach() const { return view_of(*this, shape(), strides(), offset()); }

}  // namespace ember
