// Internal: runs an optimizer's per-element rule over a CPU parameter (see Note [Fused
// updates] in nn/optim/optimizer.h).
//
//   fused_loop(param, [&](auto* p, int64_t begin, int64_t end) { ... });  // p: float* or double*
#pragma once

#include <cstdint>

#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::detail {

template <class Fn>
void fused_loop(const Tensor& param, const Fn& fn) {
  // Small enough that a 100k-element layer still splits across threads, big enough that the
  // chunking overhead stays invisible.
  constexpr int64_t kGrain = 1 << 14;
  auto run = [&](auto* p) {
    parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) { fn(p, begin, end); });
  };
  if (param.dtype() == DType::f32) run(param.data<float>());
  else run(param.data<double>());
}

// The same-typed pointer of another tensor (a gradient, a state buffer) as `p`.
template <class T>
T* same_typed(const Tensor& t, const T*) {
  return t.template data<T>();
}

}  // namespace ember::detail
