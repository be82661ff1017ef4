// Parameter initialisation, in place, under NoGradGuard, drawing from ember's Philox
// generator (the default one unless `gen` is given). Formulas follow torch.nn.init.
//
//   Tensor w = empty({out, in});
//   kaiming_uniform_(w, std::sqrt(5.0));        // nn.Linear's default weight init
//   auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(w);
//   uniform_(b, -1 / std::sqrt(fan_in), 1 / std::sqrt(fan_in));
#pragma once

#include <string_view>

#include "core/rng.h"
#include "core/tensor.h"

namespace ember::init {

enum class FanMode { fan_in, fan_out };

struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
// 2-D (out, in) weights: (in, out); 4-D (out, in, kh, kw): (in*kh*kw, out*kh*kw). Other ranks
// >= 2 use the same rule (receptive field = product of dims after the first two).
Fans calculate_fan_in_and_fan_out(const Tensor& weight);

// torch.nn.init.calculate_gain: "linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu"
// (with `param` the negative slope).
double calculate_gain(std::string_view nonlinearity, double param = 0.01);

Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
Tensor& constant_(Tensor& t, double value);

// U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                         std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);
// N(0, std^2) with std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace ember::init
