// Optimizer steps on the CPU: one parallel loop per parameter applying the shared rule
// (see Note [Fused updates] in nn/optim/optimizer.h).
#include <type_traits>

#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {
// Small enough that a 100k-element layer still splits across threads, big enough that the
// chunking overhead stays invisible.
constexpr int64_t kGrain = 1 << 14;

// Note [Optimizer loops without branches]: the rules test the step's flags (momentum, first
// step, Nesterov, weight decay, AdamW, AMSGrad) per element, through a reference that the
// loop's stores to float might alias as far as GCC could tell, so the loops stayed scalar with
// the branches inside (perf: sgd_step 8.7% of an f32 MNIST training step, 77% of it on one
// instruction). Here every flag is a template argument: each loop is straight-line code that
// vectorises, and every element still runs the rule's arithmetic in the rule's order.

// Calls f(std::bool_constant<v>{}).
template <class F>
void with_flag(bool v, F&& f) {
  if (v) f(std::true_type{});
  else f(std::false_type{});
}

template <class T, bool kMomentum, bool kFirst, bool kNesterov, bool kDecay>
void sgd_loop(SgdStep s, T* p, const T* g, T* b, int64_t begin, int64_t end) {
  s.first = kFirst;
  s.nesterov = kNesterov;
  if constexpr (!kDecay) s.weight_decay = 0;
  for (int64_t i = begin; i < end; ++i) sgd_rule<T>(s, p[i], g[i], kMomentum ? b + i : nullptr);
}

template <class T, bool kDecoupled, bool kDecay, bool kAmsgrad>
void adam_loop(AdamStep s, T* p, const T* g, T* m, T* v, T* vmax, int64_t begin, int64_t end) {
  s.decoupled = kDecoupled;
  if constexpr (!kDecay) s.weight_decay = 0;
  for (int64_t i = begin; i < end; ++i) adam_rule<T>(s, p[i], g[i], m[i], v[i], kAmsgrad ? vmax + i : nullptr);
}

}  // namespace

void sgd_step(const SgdStep& s, const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer) {
  dispatch_float(param.dtype(), "SGD", [&]<class T>(TypeTag<T>) {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* b = data_or_null<T>(momentum_buffer);
    // Note [Optimizer loops without branches]
    with_flag(b != nullptr, [&](auto momentum) {
      with_flag(s.first, [&](auto first) {
        with_flag(s.nesterov, [&](auto nesterov) {
          with_flag(s.weight_decay != 0, [&](auto decay) {
            parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
              sgd_loop<T, momentum(), first(), nesterov(), decay()>(s, p, g, b, begin, end);
            });
          });
        });
      });
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
    // Note [Optimizer loops without branches]
    with_flag(s.decoupled, [&](auto decoupled) {
      with_flag(s.weight_decay != 0, [&](auto decay) {
        with_flag(vmax != nullptr, [&](auto amsgrad) {
          parallel_for(0, param.numel(), kGrain, [&](int64_t begin, int64_t end) {
            adam_loop<T, decoupled(), decay(), amsgrad()>(s, p, g, m, v, vmax, begin, end);
          });
        });
      });
    });
  });
}

}  // namespace ember::cpu
