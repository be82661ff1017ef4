// The per-element update rules of the optimizers, shared by the CPU loop (ops/cpu/optim.cpp)
// and the CUDA kernel (ops/cuda/optim.cu) so both compute PyTorch's expressions in the
// same order: scalars are computed in double by the caller, rounded to the parameter's dtype
// once, then applied element by element.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/elementwise_functors.h"

namespace ember {

// One SGD step of one parameter (PyTorch's torch.optim.SGD).
struct SgdStep {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first = false;  // the momentum buffer is uninitialised: it becomes the gradient
};

// One Adam/AdamW step of one parameter; bias corrections precomputed for this step.
struct AdamStep {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false;  // AdamW: decay the parameter, not the gradient
  bool amsgrad = false;
  double step_size = 0;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt = 0;  // sqrt(1 - beta2^t)
};

// p, g: one element; buf: its momentum buffer (null without momentum).
template <class T>
EMBER_HOST_DEVICE void sgd_rule(const SgdStep& s, T& p, T g, T* buf) {
  T d = g;
  if (s.weight_decay != 0) d = d + T(s.weight_decay) * p;
  if (buf) {
    *buf = s.first ? d : *buf * T(s.momentum) + T(1 - s.dampening) * d;
    d = s.nesterov ? d + T(s.momentum) * *buf : *buf;
  }
  p = p + T(-s.lr) * d;
}

// m, v: first and second moments; vmax: the running max of v (amsgrad) or null.
template <class T>
EMBER_HOST_DEVICE void adam_rule(const AdamStep& s, T& p, T g, T& m, T& v, T* vmax) {
  T d = g;
  if (s.decoupled) p = p * T(1 - s.lr * s.weight_decay);
  else if (s.weight_decay != 0) d = d + T(s.weight_decay) * p;
  m = m * T(s.beta1) + T(1 - s.beta1) * d;
  v = v * T(s.beta2) + T(1 - s.beta2) * d * d;  // addcmul_'s order: (value * g) * g
  T second = v;
  if (vmax) {
    *vmax = *vmax > v ? *vmax : v;
    second = *vmax;
  }
  const T denom = std::sqrt(second) / T(s.bias_correction2_sqrt) + T(s.eps);
  p = p + T(-s.step_size) * m / denom;  // addcdiv_'s order: (value * m) / denom
}

}  // namespace ember
