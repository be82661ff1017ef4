// max_pool2d, avg_pool2d, adaptive_avg_pool2d: PyTorch fixtures (values, indices, gradients),
// f64 gradchecks, hand-checked values and the errors a user can cause.
#include <cmath>
#include <limits>
#include <string>

#include "cnn_fixtures.h"
#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::CnnCase;
using ember::test::cnn_cases;
using ember::test::error_of;
using ember::test::require_close;

namespace {

// Runs op on the case's x, checks y and dx = d sum(y * gy) / dx against the fixture, then
// gradchecks the same op in f64.
void check_case(const CnnCase& c, const std::function<Tensor(const Tensor&)>& op) {
  Tensor x = c.tensor("x").requires_grad_();
  Tensor y = op(x);
  require_close(y, c.tensor("y"), 1e-5, 1e-5, c.name + ": y");
  sum(mul(y, c.tensor("gy"))).backward();
  require_close(x.grad(), c.tensor("dx"), 1e-5, 1e-5, c.name + ": dx");
  auto r = gradcheck([&](const TensorList& in) { return op(in[0]); }, {c.tensor("x").to(DType::f64)});
  INFO(r.report);
  REQUIRE(r.ok);
}

}  // namespace

TEST_CASE("max_pool2d matches PyTorch: values, indices and gradient", "[pool]") {
  for (const CnnCase& c : cnn_cases("max_pool2d")) {
    SECTION(c.name) {
      const IntPair k = c.pair("kernel"), s = c.pair("stride"), p = c.pair("padding");
      check_case(c, [&](const Tensor& x) { return max_pool2d(x, k, s, p); });
      auto [values, indices] = max_pool2d_with_indices(c.tensor("x"), k, s, p);
      REQUIRE(indices.dtype() == DType::i64);
      REQUIRE(indices.to_vector<int64_t>() == c.tensor("indices").to_vector<int64_t>());
    }
  }
}

TEST_CASE("avg_pool2d matches PyTorch with and without padding in the divisor", "[pool]") {
  for (const CnnCase& c : cnn_cases("avg_pool2d")) {
    SECTION(c.name) {
      const IntPair k = c.pair("kernel"), s = c.pair("stride"), p = c.pair("padding");
      const bool include = c.args.at("count_include_pad").as_bool();
      check_case(c, [&](const Tensor& x) { return avg_pool2d(x, k, s, p, include); });
    }
  }
}

TEST_CASE("adaptive_avg_pool2d matches PyTorch for global, uneven and upsampling sizes", "[pool]") {
  for (const CnnCase& c : cnn_cases("adaptive_avg_pool2d")) {
    SECTION(c.name) {
      const IntPair size = c.pair("output_size");
      check_case(c, [&](const Tensor& x) { return adaptive_avg_pool2d(x, size); });
    }
  }
}

TEST_CASE("pooling by hand on a 4x4 plane", "[pool]") {
  Tensor x = arange(16.0).reshape({1, 1, 4, 4});  // rows 0..3, 4..7, 8..11, 12..15
  auto [m, idx] = max_pool2d_with_indices(x, 2);
  REQUIRE(m.to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  REQUIRE(idx.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  REQUIRE(avg_pool2d(x, 2).to_vector<float>() == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  // 3x3 windows, stride 2, padding 1: the corner window holds {0, 1, 4, 5} and 5 padding cells.
  REQUIRE(avg_pool2d(x, 3, 2, 1, true).to_vector<float>()[0] == 10.0f / 9.0f);
  REQUIRE(avg_pool2d(x, 3, 2, 1, false).to_vector<float>()[0] == 2.5f);
  REQUIRE(adaptive_avg_pool2d(x, 1).to_vector<float>() == std::vector<float>{7.5f});
  // A 3-D (C, H, W) input keeps its rank.
  REQUIRE(max_pool2d(x.reshape({1, 4, 4}), 2).shape() == Shape{1, 2, 2});
}

TEST_CASE("max_pool2d: NaN wins its window, padding never does", "[pool]") {
  Tensor x = full({1, 1, 2, 2}, -1e30);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  auto [m, idx] = max_pool2d_with_indices(x, 2);
  REQUIRE(std::isnan(m.item()));
  REQUIRE(idx.item() == 3.0);
  // With padding 1 and all inputs -inf the maximum is -inf at a real cell, not a padding cell.
  Tensor y = full({1, 1, 2, 2}, -std::numeric_limits<double>::infinity());
  auto [v, i] = max_pool2d_with_indices(y, 2, 1, 1);
  for (int64_t index : i.to_vector<int64_t>()) REQUIRE((index >= 0 && index < 4));
  REQUIRE(std::isinf(v.to_vector<float>()[0]));
}

TEST_CASE("max_pool2d backward sums the gradients of overlapping windows", "[pool]") {
  // 3x3 windows with stride 1 over a plane whose maximum is in the middle: all four windows pick it.
  Tensor x = tensor<float>({0, 1, 0, 0, 1, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, 1, 4, 4}).requires_grad_();
  sum(max_pool2d(x, 3, 1)).backward();
  REQUIRE(x.grad().to_vector<float>()[5] == 4.0f);
  REQUIRE(sum(x.grad()).item() == 4.0);
}

TEST_CASE("pooling of a non-contiguous input equals pooling of its copy", "[pool]") {
  Tensor x = randn({6, 5, 2, 3}).permute({2, 3, 0, 1});  // (2, 3, 6, 5) view
  REQUIRE(!x.is_contiguous());
  require_close(max_pool2d(x, 2, 1, 1), max_pool2d(x.contiguous(), 2, 1, 1), 0, 0, "max");
  require_close(avg_pool2d(x, 3, 2, 1), avg_pool2d(x.contiguous(), 3, 2, 1), 0, 0, "avg");
  require_close(adaptive_avg_pool2d(x, {4, 2}), adaptive_avg_pool2d(x.contiguous(), {4, 2}), 0, 0, "adaptive");
}

TEST_CASE("pooling errors name the op, the expectation and the input", "[pool][errors]") {
  Tensor x = randn({1, 2, 5, 5});
  CHECK_THAT(error_of([&] { max_pool2d(randn({5, 5}), 2); }),
             Catch::Contains("max_pool2d") && Catch::Contains("rank 3") && Catch::Contains("(5, 5)"));
  CHECK_THAT(error_of([&] { max_pool2d(x, 7); }),
             Catch::Contains("kernel (7, 7)") && Catch::Contains("padded input (5, 5)"));
  CHECK_THAT(error_of([&] { avg_pool2d(x, 2, 2, 2); }), Catch::Contains("avg_pool2d") && Catch::Contains("half"));
  CHECK_THAT(error_of([&] { avg_pool2d(x, 0); }), Catch::Contains("kernel >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(x, 2, 0); }), Catch::Contains("stride >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(x.to(DType::i64), 2); }), Catch::Contains("floating"));
  CHECK_THAT(error_of([&] { adaptive_avg_pool2d(x, {0, 2}); }), Catch::Contains("output size >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(zeros({1, 2, 0, 4}), 1); }), Catch::Contains("non-empty"));
  CHECK_THAT(error_of([&] { max_pool2d_backward(randn({1, 2, 3, 3}), zeros({1, 2, 2, 2}, {.dtype = DType::i64}),
                                                x.shape(), 2); }),
             Catch::Contains("max_pool2d_backward") && Catch::Contains("(1, 2, 2, 2)"));
}
