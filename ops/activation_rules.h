// The activations a layer can apply in its epilogue, as scalar rules shared by the CPU loops
// and the CUDA kernels (like optim_rules.h). The ops that use them are in ops/activation.h.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "ops/elementwise_functors.h"

namespace ember {

enum class Activation : uint8_t { none, relu, sigmoid, tanh };

// One activation: its value and the gradient of its input from its output.
template <Activation A>
struct ActivationFn {
  static constexpr bool kIdentity = A == Activation::none;  // backward ignores y: it may be absent
  template <class T>
  EMBER_HOST_DEVICE T operator()(T x) const {
    if constexpr (A == Activation::relu) return UnaryFn<UnaryOp::relu>{}(x);
    else if constexpr (A == Activation::sigmoid) return UnaryFn<UnaryOp::sigmoid>{}(x);
    else if constexpr (A == Activation::tanh) return UnaryFn<UnaryOp::tanh>{}(x);
    else return x;
  }
  // The gradient of the pre-activation from g = dL/dy and the activated output y.
  template <class T>
  EMBER_HOST_DEVICE T backward(T g, T y) const {
    if constexpr (A == Activation::relu) return BinaryFn<BinaryOp::relu_backward>{}(g, y);
    else if constexpr (A == Activation::sigmoid) return BinaryFn<BinaryOp::sigmoid_backward>{}(g, y);
    else if constexpr (A == Activation::tanh) return BinaryFn<BinaryOp::tanh_backward>{}(g, y);
    else return g;
  }
};

// Calls f(ActivationFn<act>{}): one compile-time functor per runtime value, for loops (CPU) and
// kernel templates (CUDA) that must not switch per element.
template <class F>
decltype(auto) visit_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::relu: return f(ActivationFn<Activation::relu>{});
    case Activation::sigmoid: return f(ActivationFn<Activation::sigmoid>{});
    case Activation::tanh: return f(ActivationFn<Activation::tanh>{});
    case Activation::none: break;
  }
  return f(ActivationFn<Activation::none>{});
}

// The same rules chosen at run time, for kernels where a switch per element costs nothing next
// to the work around it (a GEMM's store, a reduction's load).
template <class T>
EMBER_HOST_DEVICE T apply_activation(Activation act, T x) {
  switch (act) {
    case Activation::relu: return ActivationFn<Activation::relu>{}(x);
    case Activation::sigmoid: return ActivationFn<Activation::sigmoid>{}(x);
    case Activation::tanh: return ActivationFn<Activation::tanh>{}(x);
    case Activation::none: break;
  }
  return x;
}
template <class T>
EMBER_HOST_DEVICE T apply_activation_backward(Activation act, T g, T y) {
  switch (act) {
    case Activation::relu: return ActivationFn<Activation::relu>{}.backward(g, y);
    case Activation::sigmoid: return ActivationFn<Activation::sigmoid>{}.backward(g, y);
    case Activation::tanh: return ActivationFn<Activation::tanh>{}.backward(g, y);
    case Activation::none: break;
  }
  return g;
}

}  // namespace ember
