// Finite-difference check of an op's backward, in f64.
//
//   Tensor x = randn({3, 4}, {.dtype = DType::f64});
//   auto r = gradcheck([](const TensorList& in) { return tanh(in[0]); }, {x});
//   REQUIRE(r.ok);   // r.report names the worst element on failure
//
// fn's output is reduced to a scalar with fixed random weights, L = sum(fn(x) * w), and every
// element of every floating input is compared: the analytic dL/dx from backward() against the
// central difference (L(x + eps) - L(x - eps)) / 2 eps. Inputs may be non-contiguous views
// (they are perturbed in place, on any device) but must not overlap in memory.
#pragma once

#include <functional>
#include <string>

#include "autograd/engine.h"

namespace ember::autograd {

struct GradcheckResult {
  bool ok = true;
  double worst_abs_error = 0;
  std::string report;  // the worst element: input, index, analytic, numeric
};

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          GradcheckOptions options = {});

}  // namespace ember::autograd

namespace ember {
using autograd::gradcheck;
using autograd::GradcheckOptions;
using autograd::GradcheckResult;
}  // namespace ember
