#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {
// The lrs of group `g` for t = 0..n-1.
std::vector<double> trace(LrScheduler& sched, Optimizer& opt, int n, size_t g = 0) {
  std::vector<double> out{opt.lr(g)};
  for (int i = 1; i < n; ++i) {
    sched.step();
    out.push_back(opt.lr(g));
  }
  return out;
}
// A trace of learning rates against the expected one, to rounding.
void check_lrs(const std::vector<double>& got, const std::vector<double>& want) {
  test::check_close(tensor<double>(got), tensor<double>(want), 1e-12, 0);
}
}  // namespace

TEST_CASE("lr_scheduler: StepLR decays every step_size steps, per group") {
  Tensor p = zeros({1}, {.requires_grad = true}), q = zeros({1}, {.requires_grad = true});
  SGD opt({{{p}, {.lr = 1.0}}, {{q}, {.lr = 0.5}}});
  StepLR sched(opt, 2, 0.5);
  check_lrs(trace(sched, opt, 6), {1, 1, 0.5, 0.5, 0.25, 0.25});
  CHECK(opt.lr(1) == Approx(0.125));
  CHECK_THROWS_WITH(StepLR(opt, 0), Contains("step_size must be > 0, got 0"));
}

TEST_CASE("lr_scheduler: MultiStepLR decays at each milestone") {
  Tensor p = zeros({1}, {.requires_grad = true});
  SGD opt({p}, {.lr = 0.1});
  MultiStepLR sched(opt, {2, 5}, 0.1);
  check_lrs(trace(sched, opt, 7), {0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001});
  CHECK_THROWS_WITH(MultiStepLR(opt, {5, 2}), Contains("ascending"));
}

TEST_CASE("lr_scheduler: CosineWithWarmup ramps linearly then follows the cosine to min_lr") {
  Tensor p = zeros({1}, {.requires_grad = true});
  SGD opt({p}, {.lr = 1.0});
  CosineWithWarmup sched(opt, /*warmup=*/4, /*total=*/12, /*min_lr=*/0.1);
  std::vector<double> want = {0.25, 0.5, 0.75, 1.0};
  for (int t = 4; t < 14; ++t) {
    const double progress = std::min(1.0, (t - 4) / 8.0);
    want.push_back(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
  }
  const std::vector<double> got = trace(sched, opt, 14);
  check_lrs(got, want);
  CHECK(got[8] == Approx(0.55));   // half way: the mean of base and min
  CHECK(got[13] == Approx(0.1));   // stays at min_lr after total_steps
  CHECK_THROWS_WITH(CosineWithWarmup(opt, 5, 5), Contains("0 <= warmup_steps < total_steps"));
}

TEST_CASE("lr_scheduler: state_dict restores the count and the lrs") {
  Tensor p = zeros({1}, {.requires_grad = true});
  SGD a({p}, {.lr = 1.0}), b({p}, {.lr = 1.0});
  StepLR sa(a, 1, 0.5), sb(b, 1, 0.5);
  for (int i = 0; i < 3; ++i) sa.step();
  sb.load_state_dict(sa.state_dict());
  CHECK(sb.last_step() == 3);
  CHECK(b.lr() == Approx(0.125));
  sa.step();
  sb.step();
  CHECK(a.lr() == b.lr());
  CHECK_THROWS_WITH(sb.load_state_dict({{"last_step", ones({2})}, {"base_lrs", ones({1}, {.dtype = DType::f64})}}),
                    Contains("'last_step' must be one i64 value, got f32 (2,)"));
  CHECK_THROWS_WITH(sb.load_state_dict({}), Contains("expected exactly the entries"));
}
