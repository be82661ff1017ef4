// conv2d: PyTorch fixtures (forward and every gradient, f32), f64 gradchecks for every mode,
// the chunked and pointwise paths, and the errors a user can cause.
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

struct ConvArgs {
  IntPair stride, padding, dilation;
  int64_t groups;
};
ConvArgs conv_args(const CnnCase& c) {
  return {c.pair("stride"), c.pair("padding"), c.pair("dilation"), c.args.at("groups").as_int()};
}

}  // namespace

TEST_CASE("conv2d matches PyTorch: forward and gradients of x, w, b", "[conv]") {
  for (const CnnCase& c : cnn_cases("conv2d")) {
    SECTION(c.name) {
      const ConvArgs a = conv_args(c);
      // f32 sums of at most ~100 products of N(0, 1) values against an f64 reference.
      test::check_layer_case(
          c,
          [&](const Tensor& x, const Tensor& w, const Tensor& b) {
            return conv2d(x, w, b, a.stride, a.padding, a.dilation, a.groups);
          },
          1e-4);
    }
  }
}

TEST_CASE("conv2d gradcheck in f64 for every fixture mode", "[conv][gradcheck]") {
  for (const CnnCase& c : cnn_cases("conv2d")) {
    SECTION(c.name) {
      const ConvArgs a = conv_args(c);
      TensorList inputs{c.tensor("x").to(DType::f64), c.tensor("w").to(DType::f64)};
      if (c.has("b")) inputs.push_back(c.tensor("b").to(DType::f64));
      auto r = gradcheck(
          [&](const TensorList& in) {
            return conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a.stride, a.padding, a.dilation, a.groups);
          },
          inputs);
      INFO(r.report);
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("conv2d gradcheck on a non-contiguous input", "[conv][gradcheck]") {
  Tensor x = randn({5, 4, 2, 3}, {.dtype = DType::f64}).permute({3, 2, 0, 1});  // (3, 2, 5, 4) view
  Tensor w = randn({4, 1, 2, 2}, {.dtype = DType::f64});
  REQUIRE(!x.is_contiguous());
  auto r = gradcheck([](const TensorList& in) { return conv2d(in[0], in[1], {}, 1, 1, 1, 2); }, {x, w});
  INFO(r.report);
  REQUIRE(r.ok);
  // And the forward agrees with the contiguous copy exactly.
  require_close(conv2d(x, w, {}, 1, 1, 1, 2), conv2d(x.contiguous(), w, {}, 1, 1, 1, 2), 0, 0, "view");
}

TEST_CASE("conv2d splits a large batch into column chunks without changing the result", "[conv]") {
  // Columns of one image: 16 channels x 9 taps x 64 x 64 x 4 B = 2.25 MiB, so 30 images need
  // 67.5 MiB and the input gradient runs in two chunks (the budget is 64 MiB); forward and
  // weight gradient build 14-row column slices (the 512 KiB slice cap), 5 per image.
  Tensor x = randn({30, 16, 64, 64}).requires_grad_();
  Tensor w = randn({4, 16, 3, 3}).requires_grad_();
  Tensor b = randn({4}).requires_grad_();
  Tensor y = conv2d(x, w, b, 1, 1);
  Tensor gy = randn(y.shape());
  sum(mul(y, gy)).backward();
  for (int64_t n : {0, 17, 29}) {  // one image at a time: a single chunk
    Tensor xn = x.detach().narrow(0, n, 1).requires_grad_();
    Tensor yn = conv2d(xn, w.detach(), b.detach(), 1, 1);
    require_close(y.detach().narrow(0, n, 1), yn, 1e-4, 1e-4, "y of image " + std::to_string(n));
    Tensor wn = w.detach().requires_grad_();
    sum(mul(conv2d(xn, wn, {}, 1, 1), gy.narrow(0, n, 1))).backward();
    require_close(x.grad().narrow(0, n, 1), xn.grad(), 1e-4, 1e-4, "dx of image " + std::to_string(n));
  }
  // dw over the whole batch against the sum of per-chunk-sized halves.
  Tensor w1 = w.detach().requires_grad_();
  sum(mul(conv2d(x.detach().narrow(0, 0, 15), w1, {}, 1, 1), gy.narrow(0, 0, 15))).backward();
  Tensor dw_first = w1.grad();
  Tensor w2 = w.detach().requires_grad_();
  sum(mul(conv2d(x.detach().narrow(0, 15, 15), w2, {}, 1, 1), gy.narrow(0, 15, 15))).backward();
  require_close(w.grad(), add(dw_first, w2.grad()), 2e-3, 1e-4, "dw");
  require_close(b.grad(), sum(gy, {0, 2, 3}), 1e-3, 1e-4, "db");
}

TEST_CASE("conv2d with an empty batch gives an empty output and zero weight gradient", "[conv]") {
  Tensor x = zeros({0, 3, 5, 5}).requires_grad_();
  Tensor w = randn({2, 3, 3, 3}).requires_grad_();
  Tensor b = randn({2}).requires_grad_();
  Tensor y = conv2d(x, w, b);
  REQUIRE(y.shape() == Shape{0, 2, 3, 3});
  sum(y).backward();
  REQUIRE(w.grad().shape() == w.shape());
  REQUIRE(sum(abs(w.grad())).item() == 0.0);
  REQUIRE(sum(abs(b.grad())).item() == 0.0);
}

TEST_CASE("conv2d backward ops agree with autograd", "[conv]") {
  Tensor x = randn({2, 4, 6, 5}, {.dtype = DType::f64}).requires_grad_();
  Tensor w = randn({6, 2, 3, 2}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = conv2d(x, w, {}, {2, 1}, {1, 0}, {1, 2}, 2);
  Tensor gy = randn(y.shape(), {.dtype = DType::f64});
  sum(mul(y, gy)).backward();
  require_close(conv2d_input_grad(gy, w.detach(), x.shape(), {2, 1}, {1, 0}, {1, 2}, 2), x.grad(), 1e-12, 0, "dx");
  require_close(conv2d_weight_grad(x.detach(), gy, w.shape(), {2, 1}, {1, 0}, {1, 2}, 2), w.grad(), 1e-12, 0, "dw");
  require_close(conv2d_bias_grad(gy), sum(gy, {0, 2, 3}), 1e-12, 1e-12, "db");
}

TEST_CASE("conv2d errors name the op, the expectation and the shapes", "[conv][errors]") {
  Tensor x = randn({1, 4, 5, 5});
  SECTION("kernel larger than the padded input") {
    const std::string e = error_of([&] { conv2d(x, randn({2, 4, 7, 3})); });
    CHECK_THAT(e, Catch::Contains("conv2d") && Catch::Contains("kernel (7, 3)") &&
                      Catch::Contains("padded input (5, 5)") && Catch::Contains("(1, 4, 5, 5)"));
    // Padding makes it fit; dilation makes it too large again.
    CHECK(conv2d(x, randn({2, 4, 7, 3}), {}, 1, 1).shape() == Shape{1, 2, 1, 5});
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), {}, 1, 0, 3); }), Catch::Contains("spans (7, 7)"));
  }
  SECTION("channel mismatch") {
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 3, 3, 3})); }),
               Catch::Contains("conv2d") && Catch::Contains("expects 3 input channels") && Catch::Contains("has 4"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 1, 3, 3}), {}, 1, 0, 1, 2); }),
               Catch::Contains("expects 2 input channels"));
  }
  SECTION("groups that do not divide the channels") {
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 1, 3, 3}), {}, 1, 0, 1, 3); }),
               Catch::Contains("groups (3) must divide"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({3, 2, 3, 3}), {}, 1, 0, 1, 2); }),
               Catch::Contains("output channels (3)"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), {}, 1, 0, 1, 0); }), Catch::Contains("groups >= 1"));
  }
  SECTION("wrong ranks") {
    CHECK_THAT(error_of([&] { conv2d(randn({4, 5, 5}), randn({2, 4, 3, 3})); }),
               Catch::Contains("input of rank 4") && Catch::Contains("(4, 5, 5)"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3})); }),
               Catch::Contains("weight of rank 4") && Catch::Contains("(2, 4, 3)"));
  }
  SECTION("bias, dtype and argument errors") {
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), randn({3})); }),
               Catch::Contains("bias of shape (2,), got (3,)"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}, {.dtype = DType::f64})); }),
               Catch::Contains("weight of dtype f32") && Catch::Contains("got f64"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), {}, 0); }), Catch::Contains("stride >= 1"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), {}, 1, -1); }), Catch::Contains("padding >= 0"));
    CHECK_THAT(error_of([&] { conv2d(x, randn({2, 4, 3, 3}), {}, 1, 0, {1, 0}); }),
               Catch::Contains("dilation >= 1"));
    CHECK_THAT(error_of([&] { conv2d(x.to(DType::i64), randn({2, 4, 3, 3})); }),
               Catch::Contains("floating input"));
  }
  SECTION("backward ops check the gradient's shape") {
    CHECK_THAT(error_of([&] { conv2d_input_grad(randn({1, 2, 4, 4}), randn({2, 4, 3, 3}), x.shape()); }),
               Catch::Contains("conv2d_input_grad") && Catch::Contains("(1, 2, 3, 3)") &&
                   Catch::Contains("(1, 2, 4, 4)"));
    CHECK_THAT(error_of([&] { conv2d_weight_grad(x, randn({1, 2, 4, 4}), {2, 4, 3, 3}); }),
               Catch::Contains("conv2d_weight_grad"));
  }
}
