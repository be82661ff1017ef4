// fn::exp_f32, tanh_f32, log_f32 and log1p_f32 (ops/math_f32.h), the float functions of the host's
// elementwise ops: accuracy against double precision over the whole range, the edges (overflow,
// subnormals, signed zero, infinities, NaN, the domain's ends), and the ops that use them, in f32
// on vectorised and strided loops and in bf16.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/math_f32.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// |got - truth| in units of the float spacing at the truth (at least the smallest subnormal).
double ulps_from(float got, double truth) {
  if (std::isnan(truth)) return std::isnan(got) ? 0 : kInf;
  const float rounded = float(truth);
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded ? 0 : kInf;
  const float mag = std::fabs(rounded);
  const double denorm_min = std::numeric_limits<float>::denorm_min();
  const double spacing = std::max(double(std::nextafter(mag, kInf) - mag), denorm_min);
  return std::fabs(double(got) - truth) / spacing;
}

// The worst ulps of f against truth over about two million floats spread evenly over the bit
// patterns of [lo, hi] (both signs when lo < 0 < hi), and the input that gave it.
template <class F, class Truth>
std::pair<double, float> worst_ulps(float lo, float hi, F f, Truth truth) {
  std::pair<double, float> worst{0, 0};
  auto sweep = [&](float from, float to) {  // 0 <= from < to, or both negated
    const uint32_t a = std::bit_cast<uint32_t>(std::fabs(from)), b = std::bit_cast<uint32_t>(std::fabs(to));
    const uint32_t step = std::max<uint32_t>(1, (b - a) / (1u << 20));
    for (uint32_t bits = a; bits <= b && bits >= a; bits += step) {
      const float x = std::copysign(std::bit_cast<float>(bits), from < 0 || to < 0 ? -1.0f : 1.0f);
      const double e = ulps_from(f(x), truth(double(x)));
      if (e > worst.first) worst = {e, x};
    }
  };
  if (lo < 0) sweep(-0.0f, lo);
  if (hi > 0) sweep(0.0f, hi);
  return worst;
}

}  // namespace

TEST_CASE("exp_f32 is within 1.02 ulp of exp over the whole float range, subnormal results included", "[math]") {
  const auto [worst, at] = worst_ulps(-110.0f, 90.0f, fn::exp_f32, [](double x) { return std::exp(x); });
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= 1.02);
  CHECK(ulps_from(fn::exp_f32(-5.8778844f), std::exp(double(-5.8778844f))) <= 1.02);  // the worst input
}

TEST_CASE("exp_f32 at the edges: overflow where float's exp overflows, gradual underflow, zeros, NaN", "[math]") {
  CHECK(fn::exp_f32(0.0f) == 1.0f);
  CHECK(fn::exp_f32(-0.0f) == 1.0f);
  CHECK(fn::exp_f32(std::numeric_limits<float>::denorm_min()) == 1.0f);
  CHECK(fn::exp_f32(-kInf) == 0.0f);
  CHECK(fn::exp_f32(kInf) == kInf);
  CHECK(std::isnan(fn::exp_f32(std::nanf(""))));
  // The largest finite result: exp(88.7228) = 3.4e38 just fits, 88.7229 does not.
  CHECK(std::isfinite(fn::exp_f32(88.72283f)));
  CHECK(ulps_from(fn::exp_f32(88.72283f), std::exp(double(88.72283f))) <= 1.0);
  CHECK(fn::exp_f32(88.7229f) == kInf);
  CHECK(fn::exp_f32(1e30f) == kInf);
  // Subnormal results down to the smallest, then zero.
  CHECK(ulps_from(fn::exp_f32(-95.0f), std::exp(double(-95.0f))) <= 1.0);
  CHECK(fn::exp_f32(-103.2f) == std::numeric_limits<float>::denorm_min());
  CHECK(fn::exp_f32(-104.5f) == 0.0f);
  CHECK(fn::exp_f32(-1e30f) == 0.0f);
}

TEST_CASE("tanh_f32 is within 1.34 ulp of tanh, odd, with tanh(-0) = -0 and the limits at +-inf", "[math]") {
  const auto [worst, at] = worst_ulps(-12.0f, 12.0f, fn::tanh_f32, [](double x) { return std::tanh(x); });
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= 1.34);
  CHECK(ulps_from(fn::tanh_f32(0.62830955f), std::tanh(double(0.62830955f))) <= 1.34);  // the worst input
  CHECK(std::signbit(fn::tanh_f32(-0.0f)));
  CHECK(fn::tanh_f32(0.0f) == 0.0f);
  CHECK(!std::signbit(fn::tanh_f32(0.0f)));
  CHECK(fn::tanh_f32(1e-30f) == 1e-30f);
  CHECK(fn::tanh_f32(std::numeric_limits<float>::denorm_min()) == std::numeric_limits<float>::denorm_min());
  CHECK(fn::tanh_f32(kInf) == 1.0f);
  CHECK(fn::tanh_f32(-kInf) == -1.0f);
  CHECK(fn::tanh_f32(-50.0f) == -1.0f);
  CHECK(std::isnan(fn::tanh_f32(std::nanf(""))));
  for (float x : {0.62499f, 0.625f, 0.62501f, -0.625f}) {  // both sides of the switch of method
    INFO("x = " << x);
    CHECK(ulps_from(fn::tanh_f32(x), std::tanh(double(x))) <= 1.34);
  }
}

TEST_CASE("log_f32 is within 0.83 ulp of log and log1p_f32 within 2.5 ulp of log1p, subnormal inputs included",
          "[math]") {
  const auto [worst_log, at_log] = worst_ulps(0.0f, std::numeric_limits<float>::max(), fn::log_f32,
                                              [](double x) { return std::log(x); });
  INFO("log: worst " << worst_log << " ulp at x = " << at_log);
  CHECK(worst_log <= 0.83);
  const auto [worst_log1p, at_log1p] = worst_ulps(-0.99999994f, std::numeric_limits<float>::max(), fn::log1p_f32,
                                                  [](double x) { return std::log1p(x); });
  INFO("log1p: worst " << worst_log1p << " ulp at x = " << at_log1p);
  CHECK(worst_log1p <= 2.5);
}

TEST_CASE("log_f32 and log1p_f32 at the ends of their domains", "[math]") {
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  CHECK(fn::log_f32(1.0f) == 0.0f);
  CHECK(fn::log_f32(0.0f) == -kInf);
  CHECK(fn::log_f32(-0.0f) == -kInf);
  CHECK(std::isnan(fn::log_f32(-1.0f)));
  CHECK(std::isnan(fn::log_f32(-kInf)));
  CHECK(std::isnan(fn::log_f32(-denorm_min)));
  CHECK(std::isnan(fn::log_f32(std::nanf(""))));
  CHECK(fn::log_f32(kInf) == kInf);
  CHECK(ulps_from(fn::log_f32(denorm_min), std::log(double(denorm_min))) <= 0.83);
  const float largest = std::numeric_limits<float>::max();
  CHECK(ulps_from(fn::log_f32(largest), std::log(double(largest))) <= 0.83);
  CHECK(fn::log1p_f32(0.0f) == 0.0f);
  CHECK(std::signbit(fn::log1p_f32(-0.0f)));
  CHECK(fn::log1p_f32(1e-30f) == 1e-30f);
  CHECK(fn::log1p_f32(-1.0f) == -kInf);
  CHECK(std::isnan(fn::log1p_f32(-1.5f)));
  CHECK(std::isnan(fn::log1p_f32(-kInf)));
  CHECK(std::isnan(fn::log1p_f32(std::nanf(""))));
  CHECK(fn::log1p_f32(kInf) == kInf);
  CHECK(ulps_from(fn::log1p_f32(largest), std::log1p(double(largest))) <= 2.5);
}

TEST_CASE("exp sigmoid tanh log log1p and softplus on f32 tensors are within a few ulp and bf16 rounds their results",
          "[math]") {
  Generator gen(7);
  // Long contiguous rows (the vectorised loops), a strided view (the scalar loop), edge values.
  Tensor x = mul(randn({64, 1031}, {}, &gen), 12.0);
  x.view({-1}).narrow(0, 0, 6).copy_(tensor<float>({0.0f, -0.0f, kInf, -kInf, 88.7f, -100.0f}, {6}));
  // log and log1p on |x| (and 0, +inf) and on |x| - 1 (down to -1); softplus on x (log1p of exp).
  const Tensor positive = abs(x), above_minus_one = sub(abs(x), 1.0);
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    double bound;
    const Tensor& input;
  };
  const Case cases[] = {{"exp", exp, 1.02, x},
                        {"sigmoid", sigmoid, 2.5, x},
                        {"tanh", tanh, 1.34, x},
                        {"log", log, 0.83, positive},
                        {"log1p", log1p, 2.5, above_minus_one},
                        {"softplus", softplus, 3.0, x}};
  for (const Case& c : cases) {
    const auto [name, op, bound, input] = c;
    INFO(name);
    for (const Tensor& in : {input, input.t()}) {
      const std::vector<float> got = op(in).contiguous().to_vector<float>();
      const std::vector<double> truth = op(in.to(DType::f64)).contiguous().to_vector<double>();
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(truth[i]) >= std::numeric_limits<float>::min() || truth[i] == 0)  // normal results
          worst = std::max(worst, ulps_from(got[i], truth[i]));
      INFO("worst " << worst << " ulp");
      CHECK(worst <= bound);
    }
    // bf16 widens, computes in f32 and rounds once: the bits of the f32 op on the widened input.
    Tensor xb = input.to(DType::bf16);
    const Tensor widened_then_rounded = op(xb.to(DType::f32)).to(DType::bf16);
    CHECK(op(xb).to(DType::f32).to_vector<float>() == widened_then_rounded.to(DType::f32).to_vector<float>());
  }
}
