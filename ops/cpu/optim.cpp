// Optimizer steps on the CPU: one parallel loop per parameter applying the shared rule
// (see Note [Fused updates] in nn/optim/optimizer.h).
#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {
// Small enough that a 100k-element layer still splits across threads, big enough that the
// chunking overhead stays invisible.
constexpr int64_t kGrain = 1 << 14;

}  // namespace

void sgd_step(const SgdStep& s, const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer) {
  dispatch_float(param.dtype(), "SGD", [&]<class T>(TypeTag<T>) {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* b = data_or_null<T>(momentum_buffer);
    parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sgd_rule<T>(s, p[i], g[i], b ? b + i : nullptr);
    });
  });
}

void adam_step(const AdamStep& s, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq) {
  dispatch_float(param.dtype(), "Adam", [&]<class T>(TypeTag<T>) {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    T* vmax = data_or_null<T>(max_exp_avg_sq);
    parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) adam_rule<T>(s, p[i], g[i], m[i], v[i], vmax ? vmax + i : nullptr);
    });
  });
}

}  // namespace ember::cpu
