#include "nn/optim/sgd.h"

#include <functional>
#include <vector>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/kernels.h"
#include "ops/creation.h"

namespace ember {

namespace {
void check_options(const SgdOptions& o) {
  EMBER_CHECK(o.lr >= 0, "SGD: lr must be >= 0, got ", o.lr);
  EMBER_CHECK(o.momentum >= 0, "SGD: momentum must be >= 0, got ", o.momentum);
  EMBER_CHECK(o.weight_decay >= 0, "SGD: weight_decay must be >= 0, got ", o.weight_decay);
  EMBER_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
              "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum, " and dampening ",
              o.dampening);
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SgdOptions options)
    : SGD(std::vector<ParamGroup<SgdOptions>>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup<SgdOptions>> groups) : OptimizerWithOptions(std::move(groups)) {
  for (const auto& g : groups_) check_options(g.options);
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  // Note [A failed step changes nothing] (optimizer.h): everything that allocates happens in this
  // first pass; the updates are applied only when all of it succeeded.
  std::vector<std::function<void()>> updates;
  size_t index = 0;
  for (const auto& group : groups_) {
    const SgdOptions& o = group.options;
    for (const Tensor& param : group.params) {
      ParamState& st = state_of(index++);
      const Tensor grad_t = param.grad();
      if (!grad_t.defined()) continue;
      const Tensor grad = grad_t.contiguous();
      check_fusable("SGD", param, grad);
      Tensor buf;
      bool first = false;
      if (o.momentum != 0) {
        // A buffer made here but left unused by a failed step is simply made again: the step
        // count is still 0.
        Tensor& slot = st.buffers["momentum_buffer"];
        first = st.step == 0 || !slot.defined();
        if (!slot.defined()) slot = empty(param.shape(), param.options());
        buf = slot;
      }
      const SgdStep rule{.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening,
                         .weight_decay = o.weight_decay, .nesterov = o.nesterov, .first = first};
      updates.push_back([&st, rule, param, grad, buf] {
        sgd_step_kernel(param.device(), rule, param, grad, buf);
        param.bump_version();
        ++st.step;
      });
    }
  }
  for (const auto& update : updates) update();
}

}  // namespace ember
