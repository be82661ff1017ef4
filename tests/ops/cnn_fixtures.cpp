#include "cnn_fixtures.h"

#include <cmath>

#include "core/safetensors.h"
#include "support/test_support.h"

namespace ember::test {
namespace {

const SafetensorsFile& fixtures() {
  static const SafetensorsFile file = read_safetensors(std::string(EMBER_TEST_DATA_DIR) + "/cnn_fixtures.safetensors");
  return file;
}

}  // namespace

Tensor CnnCase::tensor(const std::string& what) const {
  const SafetensorsTensor* t = fixtures().find(name + "/" + what);
  EMBER_CHECK(t != nullptr, "cnn fixture: no tensor '", name, "/", what, "'");
  return from_data(t->bytes.data(), t->shape, t->dtype);
}

bool CnnCase::has(const std::string& what) const { return fixtures().find(name + "/" + what) != nullptr; }

IntPair CnnCase::pair(const char* key) const {
  const Json::Array& a = args.at(key).as_array();
  return {a.at(0).as_int(), a.at(1).as_int()};
}

std::vector<CnnCase> cnn_cases(const std::string& op) {
  const Json table = Json::parse(fixtures().metadata.at("cases"), "cnn fixture cases");
  std::vector<CnnCase> cases;
  for (const Json& c : table.as_array())
    if (c.at("op").as_string() == op) cases.push_back({c.at("name").as_string(), c});
  REQUIRE(!cases.empty());
  return cases;
}

void require_close(const Tensor& actual, const Tensor& expected, double atol, double rtol, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<double> a = actual.to(DType::f64).to_vector<double>();
  const std::vector<double> e = expected.to(DType::f64).to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double excess = std::abs(a[i] - e[i]) - (atol + rtol * std::abs(e[i]));
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      at = i;
    }
  }
  INFO("worst element " << at << ": got " << (a.empty() ? 0 : a[at]) << ", expected " << (e.empty() ? 0 : e[at]));
  REQUIRE(worst <= 0);
}

void check_layer_case(const CnnCase& c, const LayerOp& op, double tol) {
  Tensor x = c.tensor("x").requires_grad_();
  Tensor w = c.tensor("w").requires_grad_();
  Tensor b = c.has("b") ? c.tensor("b").requires_grad_() : Tensor();
  Tensor y = op(x, w, b);
  require_close(y, c.tensor("y"), tol, tol, c.name + ": y");
  sum(mul(y, c.tensor("gy"))).backward();
  require_close(x.grad(), c.tensor("dx"), tol, tol, c.name + ": dx");
  require_close(w.grad(), c.tensor("dw"), tol, tol, c.name + ": dw");
  if (b.defined()) require_close(b.grad(), c.tensor("db"), tol, tol, c.name + ": db");
}

}  // namespace ember::test
