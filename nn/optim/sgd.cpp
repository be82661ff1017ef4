#include "nn/optim/sgd.h"

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
  size_t index = 0;
  for (const auto& group : groups_) {
    const SgdOptions& o = group.options;
    for (const Tensor& param : group.params) {
      ParamState& st = state_of(index++);
      const Tensor grad_t = param.grad();
      if (!grad_t.defined()) continue;
      const Tensor grad = grad_t.contiguous();
      check_fusable("SGD", param, grad);
      const bool first = st.step == 0 || !st.buffers.count("momentum_buffer");
      Tensor buf;
      if (o.momentum != 0) {
        if (first) st.buffers["momentum_buffer"] = empty(param.shape(), param.options());
        buf = st.buffers["momentum_buffer"];
      }
      ++st.step;
      const SgdStep rule{.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening,
                         .weight_decay = o.weight_decay, .nesterov = o.nesterov, .first = first};
      sgd_step_kernel(param.device(), rule, param, grad, buf);
      param.bump_version();
    }
  }
}

}  // namespace ember
