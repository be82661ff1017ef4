// linear / linear_relu beyond the op table (tests/ops/test_op_table.cpp has their PyTorch values
// and gradients): f64 gradchecks for every rank with and without bias, values by hand, an empty
// batch, and the errors a user can cause.
#include <string>

#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::error_of;

TEST_CASE("linear gradcheck in f64, with and without bias, for 1-D to 3-D inputs", "[linear][gradcheck]") {
  const Shape shapes[] = {{4}, {3, 4}, {2, 3, 4}};
  for (const Shape& xs : shapes) {
    for (bool bias : {true, false}) {
      TensorList in{randn(xs, {.dtype = DType::f64}), randn({5, 4}, {.dtype = DType::f64})};
      if (bias) in.push_back(randn({5}, {.dtype = DType::f64}));
      auto r = gradcheck([](const TensorList& t) { return linear(t[0], t[1], t.size() > 2 ? t[2] : Tensor()); }, in);
      INFO(shape_str(xs) << " bias " << bias << ": " << r.report);
      REQUIRE(r.ok);
    }
  }
  auto r = gradcheck([](const TensorList& t) { return linear_relu(t[0], t[1], t[2]); },
                     {randn({6, 4}, {.dtype = DType::f64}), randn({5, 4}, {.dtype = DType::f64}),
                      randn({5}, {.dtype = DType::f64})});
  INFO(r.report);
  REQUIRE(r.ok);
}

TEST_CASE("linear by hand and on a transposed input", "[linear]") {
  Tensor x = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor w = tensor<float>({1, 0, 1, 1, -1, -1}, {3, 2});
  Tensor b = tensor<float>({10, 20, 30});
  REQUIRE(linear(x, w, b).to_vector<float>() == std::vector<float>{11, 23, 27, 13, 27, 23});
  REQUIRE(linear_relu(x, w).to_vector<float>() == std::vector<float>{1, 3, 0, 3, 7, 0});
  CHECK_THAT(linear(x.t(), w, b), test::all_close(add(matmul(x.t(), w.t()), b), 0, 0));  // a transposed input
  REQUIRE(linear(zeros({0, 2}), w, b).shape() == Shape{0, 3});
}

TEST_CASE("linear errors name the op and the shapes", "[linear][errors]") {
  CHECK_THAT(error_of([] { linear(randn({2, 3}), randn({4, 5})); }),
             Catch::Contains("linear") && Catch::Contains("(out, 3)") && Catch::Contains("(4, 5)"));
  CHECK_THAT(error_of([] { linear(randn({2, 3}), randn({4, 3}), randn({5})); }),
             Catch::Contains("bias of shape (4,), got (5,)"));
  CHECK_THAT(error_of([] { linear(randn({2, 3}), randn({4, 3}, {.dtype = DType::f64})); }),
             Catch::Contains("one dtype"));
  CHECK_THAT(error_of([] { linear(randn({2, 3}).to(DType::i64), randn({4, 3}).to(DType::i64)); }),
             Catch::Contains("floating"));
}
