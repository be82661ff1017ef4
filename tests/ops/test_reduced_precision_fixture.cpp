// ember's bf16 and f16 results against PyTorch's own (tests/data/make_reduced_precision_fixture.py,
// PyTorch 1.13 on the CPU). Tolerances are in units in the last place of the 16-bit format:
// both sides compute in f32 and round once (except PyTorch 1.13's mean, which rounds its sum to 16
// bits first: ember rounds once), so an elementwise result may differ only where the
// two f32 math libraries straddle a rounding boundary (1 ulp); a sum, a normalisation or a GEMM
// adds its terms in another order (2 ulps of the result, or of the largest output where
// cancellation leaves a result near zero).
#include <cmath>
#include <functional>
#include <map>

#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "support/test_support.h"

using namespace ember;

namespace {

struct Case {
  std::function<Tensor(const std::vector<Tensor>&)> op;
  double ulps;            // allowed difference, in ulps of the expected value
  bool cancels = false;   // also allow `ulps` ulps of the largest |expected| (sums of signed terms)
};

const std::map<std::string, Case>& cases(const Tensor& target) {
  static std::map<std::string, Case> table;
  table = {
      {"exp", {[](auto& in) { return exp(in[0]); }, 1}},
      {"log", {[](auto& in) { return log(in[0]); }, 1}},
      {"sqrt", {[](auto& in) { return sqrt(in[0]); }, 1}},
      {"tanh", {[](auto& in) { return tanh(in[0]); }, 1}},
      {"sigmoid", {[](auto& in) { return sigmoid(in[0]); }, 1}},
      {"gelu", {[](auto& in) { return gelu(in[0]); }, 1}},
      {"relu", {[](auto& in) { return relu(in[0]); }, 0}},
      {"add", {[](auto& in) { return add(in[0], in[1]); }, 0}},
      {"mul", {[](auto& in) { return mul(in[0], in[1]); }, 0}},
      {"div", {[](auto& in) { return div(in[0], in[1]); }, 0}},
      {"sum", {[](auto& in) { return sum(in[0], {1}); }, 1, true}},
      {"mean", {[](auto& in) { return mean(in[0], {0}); }, 1, true}},
      {"softmax", {[](auto& in) { return softmax(in[0], 1); }, 1}},
      {"log_softmax", {[](auto& in) { return log_softmax(in[0], 1); }, 1}},
      {"cross_entropy", {[target](auto& in) { return cross_entropy(in[0], target); }, 1}},
      {"max_pool2d", {[](auto& in) { return max_pool2d(in[0], 2); }, 0}},
      {"avg_pool2d", {[](auto& in) { return avg_pool2d(in[0], 3); }, 1}},
      {"batch_norm", {[](auto& in) { return batch_norm(in[0], {}, {}, {}, {}, true, 0.1, 1e-5); }, 2, true}},
      {"matmul", {[](auto& in) { return matmul(in[0], in[1]); }, 2, true}},
      {"conv2d", {[](auto& in) { return conv2d(in[0], in[1], {}, 1, 1); }, 2, true}},
  };
  return table;
}

double ulp_of(double v, DType dtype) {
  const int mantissa = dtype == DType::bf16 ? 8 : 11;  // significant bits
  const int e = v == 0 ? -126 : std::ilogb(v);
  return std::ldexp(1.0, std::max(e, dtype == DType::bf16 ? -126 : -14) - (mantissa - 1));
}

}  // namespace

TEST_CASE("reduced precision: bf16 and f16 results match PyTorch's", "[ops][f16][fixture]") {
  const std::string path = std::string(EMBER_TEST_DATA_DIR) + "/reduced_precision_fixtures.safetensors";
  const StateDict file = load_tensors(path);
  const auto& table = cases(file.at("target"));
  int checked = 0;
  for (const char* dname : {"bf16", "f16"}) {
    for (const auto& [name, c] : table) {
      const std::string prefix = std::string(dname) + "/" + name + "/";
      if (!file.count(prefix + "out")) continue;  // PyTorch 1.13 lacks this op for f16 on the CPU
      INFO(prefix);
      std::vector<Tensor> in;
      for (int k = 0; file.count(prefix + "in" + std::to_string(k)); ++k) in.push_back(file.at(prefix + "in" + std::to_string(k)));
      const Tensor expected = file.at(prefix + "out");
      const Tensor got = c.op(in);
      REQUIRE(got.dtype() == expected.dtype());
      REQUIRE(got.shape() == expected.shape());
      const std::vector<float> g = got.to(DType::f32).to_vector<float>(), e = expected.to(DType::f32).to_vector<float>();
      double largest = 0;
      for (float v : e) largest = std::max(largest, std::fabs(double(v)));
      for (size_t i = 0; i < e.size(); ++i) {
        double tol = c.ulps * ulp_of(std::fabs(e[i]), expected.dtype());
        if (c.cancels) tol = std::max(tol, c.ulps * ulp_of(largest, expected.dtype()));
        if (std::fabs(double(g[i]) - double(e[i])) > tol)
          FAIL(prefix << " element " << i << ": ember " << g[i] << ", PyTorch " << e[i] << " (tolerance " << tol << ")");
      }
      ++checked;
    }
  }
  // Every case in bf16 (PyTorch 1.13 has them all); in f16 its CPU has add, mul, div, sum, mean and
  // the f32-accumulated matmul.
  CHECK(checked == int(table.size()) + 6);
  CHECK(file.count("bf16/matmul/out") == 1);
  CHECK(file.count("bf16/conv2d/out") == 1);
}
