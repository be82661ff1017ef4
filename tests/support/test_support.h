// Helpers for ember's tests: value comparison that names the worst element, PyTorch fixtures
// read from tests/data/, and a gradcheck assertion that prints its report.
//
//   REQUIRE_THAT(matmul(a, b), test::all_close(expected, /*rtol=*/1e-5, /*atol=*/1e-6));
//   test::Fixtures fx("ops_fixtures.safetensors");
//   Tensor x = fx.get("exp/in0");
//   test::require_gradcheck([](const TensorList& in) { return exp(in[0]); }, {x.to(DType::f64)});
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "ember.h"

namespace ember::test {

// ---- value comparison ---------------------------------------------------------------------------
// The one comparison of the tests, actual first: element-wise
//   |actual - expected| <= atol + rtol * |expected|
// where NaN matches NaN (and nothing else) and an infinity matches the same infinity. Shapes must be
// equal; dtypes may differ (both are compared as f64); an undefined tensor matches only an
// undefined one. On failure the message names the worst element: its index, both values.
//
//   REQUIRE_THAT(actual, all_close(expected, rtol, atol));   // Catch matcher
//   check_close(actual, expected, rtol, atol);               // non-fatal CHECK, for helpers
class AllClose : public Catch::MatcherBase<Tensor> {
 public:
  AllClose(Tensor expected, double rtol, double atol) : expected_(std::move(expected)), rtol_(rtol), atol_(atol) {}
  bool match(const Tensor& actual) const override;
  std::string describe() const override;

 private:
  Tensor expected_;
  double rtol_, atol_;
  mutable std::string last_;
};
AllClose all_close(const Tensor& expected, double rtol, double atol);

void check_close(const Tensor& actual, const Tensor& expected, double rtol, double atol);

// ---- fixtures ---------------------------------------------------------------------------------------
// Absolute path of a file in tests/data/.
std::string data_path(const std::string& file);
// Where the data sets are fetched to: $EMBER_DATA_DIR, else the repository's data/ (the README's
// `datasets/fetch_mnist.sh data/mnist`). Tests that need MNIST skip when it is not there.
std::string mnist_data_root();

// Every tensor of tests/data/<file> (a safetensors file), by name, as ember Tensors on the CPU.
class Fixtures {
 public:
  explicit Fixtures(const std::string& file);
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // A missing name is an ember::Error naming the file and the name.
  Tensor get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;

 private:
  std::string file_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// ---- gradients ---------------------------------------------------------------------------------------
// Runs gradcheck and REQUIREs success, printing the report (the worst element) on failure.
void require_gradcheck(const std::function<Tensor(const autograd::TensorList&)>& fn,
                       const autograd::TensorList& inputs, GradcheckOptions options = {});

// ---- inputs ---------------------------------------------------------------------------------------------
// The same values as `x` in a non-contiguous layout (a fresh leaf without autograd history):
enum class Layout { contiguous, permuted, strided };
// permuted: stored with the dims reversed and viewed back through permute (needs two dims of
// size > 1; other tensors fall back to strided); strided: every other element of a buffer twice as long in the
// last dim (rank >= 1; a 0-d tensor is returned as a copy).
Tensor relayout(const Tensor& x, Layout layout);
const char* layout_name(Layout layout);

// ---- skipping ---------------------------------------------------------------------------------------
// Ends the running test case as skipped, saying why: CTest reports it under "did not run
// (Skipped)" instead of as passed (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt matches the
// marker). For the CUDA halves of tests in a build or process without a cuda device, and for
// tests that need data that is not there.
#define EMBER_SKIP(reason)                           \
  do {                                               \
    WARN("EMBER_TEST_SKIPPED: " << reason);          \
    return;                                          \
  } while (0)

// ---- errors ---------------------------------------------------------------------------------------------
// The message of the ember::Error that fn throws, or "(no error)"; for CHECK_THAT(error_of(...),
// Contains(...)) on what a user would read.
std::string error_of(const std::function<void()>& fn);

}  // namespace ember::test
