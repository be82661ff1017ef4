#include "nn/optim/adam.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/kernels.h"
#include "ops/creation.h"

namespace ember {

namespace {
void check_options(const AdamOptions& o, const char* name) {
  EMBER_CHECK(o.lr >= 0, name, ": lr must be >= 0, got ", o.lr);
  EMBER_CHECK(o.eps >= 0, name, ": eps must be >= 0, got ", o.eps);
  EMBER_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, name,
              ": betas must be in [0, 1), got (", o.beta1, ", ", o.beta2, ")");
  EMBER_CHECK(o.weight_decay >= 0, name, ": weight_decay must be >= 0, got ", o.weight_decay);
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}, false) {}
Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam(std::move(groups), false) {}
Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups, bool decoupled)
    : OptimizerWithOptions(std::move(groups)), decoupled_(decoupled) {
  for (const auto& g : groups_) check_options(g.options, decoupled ? "AdamW" : "Adam");
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}, true) {}
AdamW::AdamW(std::vector<ParamGroup<AdamOptions>> groups) : Adam(std::move(groups), true) {}

void Adam::step() {
  const char* name = decoupled_ ? "AdamW" : "Adam";
  autograd::NoGradGuard no_grad;
  // Note [A failed step changes nothing] (optimizer.h): everything that allocates happens in this
  // first pass; the updates are applied only when all of it succeeded.
  std::vector<std::function<void()>> updates;
  size_t index = 0;
  for (const auto& group : groups_) {
    const AdamOptions& o = group.options;
    for (const Tensor& param : group.params) {
      ParamState& st = state_of(index++);
      const Tensor grad_t = param.grad();
      if (!grad_t.defined()) continue;
      const Tensor grad = grad_t.contiguous();
      check_fusable(name, param, grad);
      auto buffer = [&](const char* key) -> Tensor& {
        Tensor& b = st.buffers[key];
        if (!b.defined()) b = zeros(param.shape(), param.options());
        return b;
      };
      const Tensor m_t = buffer("exp_avg"), v_t = buffer("exp_avg_sq");
      const Tensor vmax_t = o.amsgrad ? buffer("max_exp_avg_sq") : Tensor();
      const int64_t step = st.step + 1;
      // Scalars as PyTorch computes them: in double, then rounded to the parameter's dtype.
      const double bias_correction1 = 1 - std::pow(o.beta1, double(step));
      const double bias_correction2_sqrt = std::sqrt(1 - std::pow(o.beta2, double(step)));
      const AdamStep rule{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                          .weight_decay = o.weight_decay, .decoupled = decoupled_, .amsgrad = o.amsgrad,
                          .step_size = o.lr / bias_correction1, .bias_correction2_sqrt = bias_correction2_sqrt};
      updates.push_back([&st, step, rule, param, grad, m_t, v_t, vmax_t] {
        adam_step_kernel(param.device(), rule, param, grad, m_t, v_t, vmax_t);
        param.bump_version();
        st.step = step;
      });
    }
  }
  for (const auto& update : updates) update();
}

}  // namespace ember
