// The PyTorch fixtures of the CNN op tests (tests/data/make_cnn_fixtures.py writes them).
//
//   for (const CnnCase& c : cnn_cases("conv2d")) {
//     Tensor x = c.tensor("x");              // f32, from "<case>/x"
//     int64_t groups = c.args.at("groups").as_int();
//   }
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/json.h"
#include "ember.h"

namespace ember::test {

struct CnnCase {
  std::string name;
  Json args;  // the case's entry of the "cases" table (op, stride, padding, ...)
  Tensor tensor(const std::string& what) const;  // "<name>/<what>" as a CPU tensor
  bool has(const std::string& what) const;
  IntPair pair(const char* key) const;  // a [h, w] argument
};

// The cases of one op ("conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "linear").
std::vector<CnnCase> cnn_cases(const std::string& op);

// |actual - expected| <= atol + rtol |expected| everywhere (shapes must match); names the
// worst element on failure.
void require_close(const Tensor& actual, const Tensor& expected, double atol, double rtol, const std::string& what);

// A layer case (conv2d, linear, their fused forms): runs op(x, w, b) on the case's inputs and
// requires y and the gradients of sum(y * gy) with respect to x, w and b (when the case has a
// bias) to match the fixture within `tol` (absolute and relative).
using LayerOp = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;
void check_layer_case(const CnnCase& c, const LayerOp& op, double tol);

}  // namespace ember::test
