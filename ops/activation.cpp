#include "ops/activation.h"

#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
  }
  return "?";
}

Activation activation_from_name(std::string_view name) {
  for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh})
    if (name == activation_name(act)) return act;
  EMBER_FAIL("activation: unknown name '", name, "' (expected none, relu, sigmoid or tanh)");
}

Tensor activate(const Tensor& x, Activation act) {
  switch (act) {
    case Activation::relu: return relu(x);
    case Activation::sigmoid: return sigmoid(x);
    case Activation::tanh: return tanh(x);
    case Activation::none: break;
  }
  return x;
}

BiasActivationGrad bias_activation_backward(Tensor dy, const Tensor& y, Activation act, int64_t channel_dim,
                                            bool bias_grad) {
  const char* op = "bias_activation_backward";
  EMBER_CHECK(dy.defined(), op, ": expected a defined gradient");
  EMBER_CHECK(is_floating(dy.dtype()), op, ": expected a floating gradient, got ", dtype_name(dy.dtype()));
  EMBER_CHECK(dy.dim() >= 1, op, ": expected a gradient with a channel dim, got a 0-d tensor");
  const int64_t cd = normalize_dim(channel_dim, dy.dim(), op);
  if (act != Activation::none) {
    EMBER_CHECK(y.defined() && y.shape() == dy.shape(), op, ": expected the activated output of shape ",
                shape_str(dy.shape()), ", got ", y.defined() ? shape_str(y.shape()) : std::string("none"));
    check_same_dtype(op, dy, y);
    check_same_device(op, dy, y);
  }
  if (act == Activation::none && !bias_grad) return {dy, Tensor()};

  const Shape& s = dy.shape();
  const int64_t outer = numel_of(Shape(s.begin(), s.begin() + cd));
  const int64_t inner = numel_of(Shape(s.begin() + cd + 1, s.end()));
  const Shape as_3d{outer, s[size_t(cd)], inner};
  const bool activated = act != Activation::none;
  const bool donated = activated && dy.is_contiguous() && dy.is_exclusive();  // Note [Donated gradients]
  BiasActivationGrad grads;
  grads.input = !activated || donated ? dy : Tensor::empty(s, dy.options());
  if (bias_grad) grads.bias = Tensor::empty({s[size_t(cd)]}, dy.options());
  bias_activation_backward_kernel(dy.device(), act, dy.contiguous().view(as_3d),
                                  activated ? y.contiguous().view(as_3d) : Tensor(),
                                  activated ? grads.input.view(as_3d) : Tensor(), grads.bias);
  return grads;
}

}  // namespace ember
