// The optimizer steps on cuda (ops/cuda/optim.cu) against the CPU steps: the same rule, so the
// same parameters and state after a few steps.
#include "ember.h"
#include "support/test_support.h"

using namespace ember;

namespace {

// Runs `steps` steps of the optimizer made by `make` on a CPU copy and a cuda copy of one
// parameter, feeding both the same gradients, and returns (cpu, cuda) parameters.
template <class Make>
std::pair<Tensor, Tensor> run_both(Make make, int steps) {
  manual_seed(3);
  Tensor init = randn({37, 5});
  Tensor p_cpu = init.clone().requires_grad_(), p_cuda = init.to(Device::cuda()).detach().requires_grad_();
  auto opt_cpu = make(p_cpu);
  auto opt_cuda = make(p_cuda);
  for (int s = 0; s < steps; ++s) {
    Tensor g = randn({37, 5});
    p_cpu.set_grad(g);
    p_cuda.set_grad(g.to(Device::cuda()));
    opt_cpu->step();
    opt_cuda->step();
  }
  return {p_cpu.detach(), p_cuda.detach().cpu()};
}

}  // namespace

TEST_CASE("cuda optim: SGD with momentum, nesterov and weight decay matches the CPU") {
  auto [a, b] = run_both([](Tensor p) {
    return std::make_unique<SGD>(std::vector<Tensor>{p}, SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2,
                                                                      .nesterov = true});
  }, 3);
  REQUIRE_THAT(b, test::all_close(a, 1e-6, 1e-6));
}

TEST_CASE("cuda optim: Adam (amsgrad) and AdamW match the CPU") {
  auto [a, b] = run_both([](Tensor p) {
    return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 1e-2, .amsgrad = true});
  }, 3);
  REQUIRE_THAT(b, test::all_close(a, 1e-6, 1e-6));
  auto [c, d] = run_both([](Tensor p) {
    return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 1e-1});
  }, 3);
  REQUIRE_THAT(d, test::all_close(c, 1e-6, 1e-6));
}
