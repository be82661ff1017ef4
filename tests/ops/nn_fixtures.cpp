#include "ops/nn_fixtures.h"

#include <cmath>
#include <cstring>

#include "core/safetensors.h"
#include "support/test_support.h"

namespace ember::test {

Tensor nn_fixture(const std::string& name) {
  static const SafetensorsFile file = read_safetensors(std::string(EMBER_TEST_DATA_DIR) + "/nn_fixtures.safetensors");
  const SafetensorsTensor* t = file.find(name);
  EMBER_CHECK(t != nullptr, "nn_fixture: no tensor named ", name, " (regenerate tests/data/nn_fixtures.safetensors)");
  return from_data(t->bytes.data(), t->shape, t->dtype, {.dtype = t->dtype});
}

double nn_fixture_scalar(const std::string& name) { return nn_fixture(name).item(); }

void require_close(const Tensor& got, const Tensor& expected, double tol) {
  INFO("shapes " << shape_str(got.shape()) << " and " << shape_str(expected.shape()));
  REQUIRE(got.shape() == expected.shape());
  const std::vector<double> a = got.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> b = expected.to(DType::f64).contiguous().to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(a[i] - b[i]) / (1 + std::fabs(b[i]));
    if (std::isnan(err)) { worst = INFINITY; at = i; break; }
    if (err > worst) { worst = err; at = i; }
  }
  INFO("worst relative error " << worst << " at flat index " << at << ": got " << (a.empty() ? 0 : a[at])
                               << ", expected " << (b.empty() ? 0 : b[at]));
  REQUIRE(worst <= tol);
}

}  // namespace ember::test
