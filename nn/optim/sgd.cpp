#include "nn/optim/sgd.h"

#include "autograd/autograd.h"
#include "core/error.h"
#include "nn/optim/fused_loop.h"
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
      detail::fused_loop(param, [&](auto* p, int64_t begin, int64_t end) {
        using T = std::remove_pointer_t<decltype(p)>;
        const T* g = detail::same_typed(grad, p);
        T* b = buf.defined() ? detail::same_typed(buf, p) : nullptr;
        const T wd = T(o.weight_decay), m = T(o.momentum), keep = T(1 - o.dampening), neg_lr = T(-o.lr);
        for (int64_t i = begin; i < end; ++i) {
          T d = g[i];
          if (o.weight_decay != 0) d = d + wd * p[i];
          if (b) {
            b[i] = first ? d : b[i] * m + keep * d;
            d = o.nesterov ? d + m * b[i] : b[i];
          }
          p[i] = p[i] + neg_lr * d;
        }
      });
      param.bump_version();
    }
  }
}

}  // namespace ember
