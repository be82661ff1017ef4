// softmax / log_softmax beyond the op table (tests/ops/test_op_table.cpp has their PyTorch values,
// gradients and gradchecks over the first, a middle and the last dim, on three layouts): huge
// logits, f32 accuracy against f64, the fused backward ops, edge shapes, errors, fast_exp.
#include <cmath>
#include <limits>

#include "ops/cpu/vec_math.h"
#include "support/test_support.h"

using namespace ember;
using ember::test::check_close;

namespace {

Tensor f64_randn(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, {.dtype = DType::f64}, &g), scale);
}

}  // namespace

TEST_CASE("softmax of huge logits stays finite") {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor x = tensor<double>({1e4, 0, -1e4, 1e4 - 1}, {1, 4}).to(dtype);
    check_close(softmax(x, 1), tensor<double>({1 / (1 + std::exp(-1.0)), 0, 0, std::exp(-1.0) / (1 + std::exp(-1.0))}, {1, 4}), 1e-6, 1e-6);
    Tensor ls = log_softmax(x, 1);
    const double lse = 1e4 + std::log1p(std::exp(-1.0));
    check_close(ls, tensor<double>({1e4 - lse, -lse, -1e4 - lse, 1e4 - 1 - lse}, {1, 4}), 1e-6, 1e-6);
    // Along a non-last dim too (the lane traversal).
    check_close(softmax(x.t(), 0), softmax(x, 1).t(), 1e-7, 1e-7);
  }
}

TEST_CASE("f32 softmax agrees with f64 across a wide range of logits") {
  // The reference sees the same f32-rounded logits (rounding a logit of 60 alone moves a
  // log-probability by 4e-6).
  for (const Shape& shape : {Shape{16, 1000}, Shape{2, 300, 70}}) {
    INFO("shape " << shape_str(shape));
    Tensor x = f64_randn(shape, 3, 20.0).to(DType::f32);  // exp arguments down to about -150
    Tensor x64 = x.to(DType::f64);
    check_close(softmax(x, 1), softmax(x64, 1), 1e-6, 1e-6);
    check_close(log_softmax(x, 1), log_softmax(x64, 1), 1e-6, 1e-6);
  }
}

TEST_CASE("softmax_backward and log_softmax_backward are the fused formulas") {
  Tensor x = f64_randn({3, 6}, 5), g = f64_randn({3, 6}, 6);
  Tensor y = softmax(x, 1);
  check_close(softmax_backward(g, y, 1), mul(y, sub(g, sum(mul(g, y), {1}, true))), 1e-14, 1e-14);
  Tensor ly = log_softmax(x, 1);
  check_close(log_softmax_backward(g, ly, 1), sub(g, mul(exp(ly), sum(g, {1}, true))), 1e-14, 1e-14);
  REQUIRE_THROWS_WITH(softmax_backward(ones({3, 5}, {.dtype = DType::f64}), y, 1),
                      Catch::Contains("softmax_backward") && Catch::Contains("(3, 6)"));
}

TEST_CASE("softmax handles edge shapes and rejects bad input") {
  Tensor s = softmax(tensor<double>({2.0}, Shape{}), 0);  // 0-d
  REQUIRE(s.item() == 1.0);
  REQUIRE(softmax(zeros({0, 3}), 1).shape() == Shape{0, 3});
  check_close(softmax(zeros({2, 4}), 1), full({2, 4}, 0.25), 1e-7, 1e-7);
  REQUIRE_THROWS_WITH(softmax(ones({2, 3}, {.dtype = DType::i64}), 1), Catch::Contains("softmax") && Catch::Contains("floating"));
  REQUIRE_THROWS_WITH(log_softmax(ones({2, 3}), 2), Catch::Contains("log_softmax"));
}

TEST_CASE("fast_exp (f32) is within a few ulp of exp and handles the edges") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double exact = std::exp(double(x));
    worst = std::max(worst, std::fabs(double(cpu::fast_exp(x)) - exact) / exact);
  }
  INFO("worst relative error " << worst);
  REQUIRE(worst < 3e-7);  // 2.5 ulp at 2^-24 relative
  REQUIRE(cpu::fast_exp(0.0f) == 1.0f);
  REQUIRE(cpu::fast_exp(-1e4f) == 0.0f);
  REQUIRE(cpu::fast_exp(-std::numeric_limits<float>::infinity()) == 0.0f);
  REQUIRE(std::isinf(cpu::fast_exp(100.0f)));
  REQUIRE(std::isnan(cpu::fast_exp(std::nanf(""))));
}
