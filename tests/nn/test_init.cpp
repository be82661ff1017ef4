#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "nn/init.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {
double sample_std(const Tensor& t) { return stddev(t.to(DType::f64)).item(); }
}  // namespace

TEST_CASE("init: fan in and fan out of 2-D and 4-D weights") {
  const init::Fans linear = init::calculate_fan_in_and_fan_out(empty({10, 20}));
  CHECK(linear.fan_in == 20);
  CHECK(linear.fan_out == 10);
  const init::Fans conv = init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 5}));
  CHECK(conv.fan_in == 75);
  CHECK(conv.fan_out == 200);
  CHECK_THROWS_WITH(init::calculate_fan_in_and_fan_out(empty({4})), Contains("at least 2 dims, got shape (4,)"));
  CHECK(init::calculate_gain("relu") == Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain("leaky_relu", std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3.0)));
  CHECK_THROWS_WITH(init::calculate_gain("swish"), Contains("unknown nonlinearity 'swish'"));
}

TEST_CASE("init: uniform families stay inside their bounds and fill them") {
  Tensor w = empty({200, 100});
  init::kaiming_uniform_(w, 0.0, init::FanMode::fan_in, "relu");
  const double kaiming = std::sqrt(2.0) * std::sqrt(3.0 / 100.0);
  CHECK(w.max().item() <= kaiming);
  CHECK(w.min().item() >= -kaiming);
  CHECK(w.max().item() > 0.98 * kaiming);
  CHECK(sample_std(w) == Approx(kaiming / std::sqrt(3.0)).epsilon(0.03));

  init::xavier_uniform_(w, 2.0);
  const double xavier = 2.0 * std::sqrt(6.0 / 300.0);
  CHECK(w.max().item() <= xavier);
  CHECK(w.min().item() < -0.98 * xavier);

  init::uniform_(w, 3.0, 4.0);
  CHECK(w.min().item() >= 3.0);
  CHECK(w.max().item() < 4.0);
}

TEST_CASE("init: normal families have the specified standard deviation") {
  Tensor w = empty({256, 128});
  init::kaiming_normal_(w, 0.0, init::FanMode::fan_out, "relu");
  CHECK(sample_std(w) == Approx(std::sqrt(2.0 / 256.0)).epsilon(0.03));
  init::xavier_normal_(w);
  CHECK(sample_std(w) == Approx(std::sqrt(2.0 / 384.0)).epsilon(0.03));
  init::normal_(w, 5.0, 0.5);
  CHECK(w.mean().item() == Approx(5.0).epsilon(0.01));
  init::ones_(w);
  CHECK(w.min().item() == 1.0);
  init::zeros_(w);
  CHECK(w.max().item() == 0.0);
}

TEST_CASE("init: works on parameters that require grad, draws from the given generator") {
  Tensor a = empty({4, 4}, {.requires_grad = true}), b = empty({4, 4}, {.requires_grad = true});
  Generator g1(3), g2(3);
  init::kaiming_uniform_(a, std::sqrt(5.0), init::FanMode::fan_in, "leaky_relu", &g1);
  init::kaiming_uniform_(b, std::sqrt(5.0), init::FanMode::fan_in, "leaky_relu", &g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(g1.offset() > 0);
  CHECK(a.requires_grad());
  Tensor labels = zeros({3}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(init::normal_(labels), Contains("normal_: expected a floating tensor, got i64"));
}
