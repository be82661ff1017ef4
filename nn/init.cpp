#include "nn/init.h"

#include <cmath>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/creation.h"

namespace ember::init {

namespace {

void check_floating(const Tensor& t, const char* fn) {
  EMBER_CHECK(t.defined(), fn, ": got an undefined tensor");
  EMBER_CHECK(is_floating(t.dtype()), fn, ": expected a floating tensor, got ", dtype_name(t.dtype()));
}

// Draws a fresh tensor of t's shape and copies it in (in-place writes need NoGradGuard when
// t is a parameter).
template <class Draw>
Tensor& fill_with(Tensor& t, const char* fn, const Draw& draw) {
  check_floating(t, fn);
  autograd::NoGradGuard no_grad;
  t.copy_(draw(TensorOptions{.dtype = t.dtype(), .device = t.device()}));
  return t;
}

int64_t fan(const Tensor& t, FanMode mode, const char* fn) {
  EMBER_CHECK(t.dim() >= 2, fn, ": fan in and fan out need a weight with at least 2 dims, got shape ",
              shape_str(t.shape()));
  const Fans f = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::fan_in ? f.fan_in : f.fan_out;
}

}  // namespace

Fans calculate_fan_in_and_fan_out(const Tensor& weight) {
  EMBER_CHECK(weight.dim() >= 2, "calculate_fan_in_and_fan_out: expected a weight with at least 2 dims, got shape ",
              shape_str(weight.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return {weight.size(1) * receptive, weight.size(0) * receptive};
}

double calculate_gain(std::string_view nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "sigmoid")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  EMBER_FAIL("calculate_gain: unknown nonlinearity '", nonlinearity,
             "', expected linear, conv1d, conv2d, sigmoid, tanh, relu or leaky_relu");
}

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  return fill_with(t, "uniform_", [&](TensorOptions o) { return uniform(t.shape(), low, high, o, gen); });
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  return fill_with(t, "normal_", [&](TensorOptions o) { return normal(t.shape(), mean, std, o, gen); });
}

Tensor& constant_(Tensor& t, double value) {
  check_floating(t, "constant_");
  autograd::NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, std::string_view nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_uniform_");
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / double(fan(t, mode, "kaiming_uniform_")));
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, std::string_view nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_normal_");
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(double(fan(t, mode, "kaiming_normal_")));
  return normal_(t, 0.0, std, gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_uniform_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(f.fan_in + f.fan_out));
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_normal_");
  const Fans f = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out)), gen);
}

}  // namespace ember::init
