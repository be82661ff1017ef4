// batch_norm: PyTorch fixtures (forward, gradients, updated running stats; plain and with a fused
// activation) in training and evaluation for 2-D and 4-D inputs, f64 gradchecks, and the errors
// a user can cause.
#include "ops/nn_fixtures.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::nn_fixture;
using ember::test::require_close;

namespace {

struct BnRun {
  Tensor y, dx, dweight, dbias, running_mean, running_var;
};

// Runs the fixture case `c` ("bn2d", "bn4d", "bn4d_relu", ...) in `mode` ("train"/"eval") in
// `dtype`, with the fused activation the case was made with.
BnRun run_fixture(const std::string& c, const std::string& mode, DType dtype, Activation act) {
  Tensor x = nn_fixture(c + ".x").to(dtype).requires_grad_();
  Tensor w = nn_fixture(c + ".weight").to(dtype).requires_grad_();
  Tensor b = nn_fixture(c + ".bias").to(dtype).requires_grad_();
  BnRun r;
  r.running_mean = nn_fixture(c + ".running_mean").to(dtype);
  r.running_var = nn_fixture(c + ".running_var").to(dtype);
  r.y = batch_norm(x, w, b, r.running_mean, r.running_var, mode == "train", 0.1, 1e-5, act);
  sum(mul(r.y, nn_fixture(c + ".grad").to(dtype))).backward();
  r.dx = x.grad();
  r.dweight = w.grad();
  r.dbias = b.grad();
  return r;
}

void check_against_fixture(const std::string& c, const std::string& mode, DType dtype, double tol,
                           Activation act = Activation::none) {
  INFO(c << " " << mode << " " << dtype_name(dtype));
  BnRun r = run_fixture(c, mode, dtype, act);
  const std::string p = c + "." + mode + ".";
  require_close(r.y, nn_fixture(p + "y"), tol);
  require_close(r.dx, nn_fixture(p + "dx"), tol);
  require_close(r.dweight, nn_fixture(p + "dweight"), tol);
  require_close(r.dbias, nn_fixture(p + "dbias"), tol);
  require_close(r.running_mean, nn_fixture(p + "running_mean"), tol);
  require_close(r.running_var, nn_fixture(p + "running_var"), tol);
}

Tensor f64_randn(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::f64}, &g);
}

}  // namespace

TEST_CASE("batch_norm matches PyTorch in training and evaluation, 2-D and 4-D") {
  for (const char* c : {"bn2d", "bn4d"})
    for (const char* mode : {"train", "eval"}) {
      check_against_fixture(c, mode, DType::f64, 1e-10);
      check_against_fixture(c, mode, DType::f32, 2e-5);  // f32 storage, double accumulation
    }
}

TEST_CASE("batch_norm with a fused activation matches PyTorch's batch_norm then activation") {
  const std::pair<const char*, Activation> cases[] = {
      {"bn2d_tanh", Activation::tanh}, {"bn4d_relu", Activation::relu}, {"bn4d_sigmoid", Activation::sigmoid}};
  for (const auto& [c, act] : cases)
    for (const char* mode : {"train", "eval"}) {
      check_against_fixture(c, mode, DType::f64, 1e-10, act);
      check_against_fixture(c, mode, DType::f32, 2e-5, act);
    }
}

TEST_CASE("batch_norm gradcheck: training and evaluation, 2-D and 4-D, with and without affine") {
  for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 4, 2}}) {
    for (bool training : {true, false}) {
      for (bool affine : {true, false}) {
        INFO("shape " << shape_str(shape) << " training " << training << " affine " << affine);
        Tensor x = f64_randn(shape, 1);
        Tensor w = affine ? add(f64_randn({3}, 2), 1.0) : Tensor();
        Tensor b = affine ? f64_randn({3}, 3) : Tensor();
        Tensor rm = f64_randn({3}, 4), rv = add(rand({3}, {.dtype = DType::f64}), 0.5);
        auto r = gradcheck(
            [&](const TensorList& in) {
              return batch_norm(in[0], affine ? in[1] : Tensor(), affine ? in[2] : Tensor(), rm, rv, training);
            },
            affine ? TensorList{x, w, b} : TensorList{x});
        INFO(r.report);
        REQUIRE(r.ok);
      }
    }
  }
}

TEST_CASE("batch_norm trains without running stats and normalises each channel") {
  Tensor x = add(mul(f64_randn({64, 3, 2, 2}, 5), 4.0), 10.0);
  Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), /*training=*/true);
  require_close(mean(y, {0, 2, 3}), zeros({3}, {.dtype = DType::f64}), 1e-12);
  require_close(var(y, {0, 2, 3}, /*correction=*/0), ones({3}, {.dtype = DType::f64}), 1e-4);  // eps 1e-5
}

TEST_CASE("batch_norm reads non-contiguous input") {
  Tensor x = f64_randn({3, 6, 4}, 9).transpose(0, 2);  // (4, 6, 3), channels strided
  Tensor w = f64_randn({6}, 10), b = f64_randn({6}, 11);
  require_close(batch_norm(x, w, b, Tensor(), Tensor(), true), batch_norm(x.contiguous(), w, b, Tensor(), Tensor(), true),
                1e-14);
}

TEST_CASE("batch_norm's running-stat update follows PyTorch's momentum convention") {
  // One channel holding {1, 3}: batch mean 2, biased var 1, unbiased var 2.
  Tensor x = tensor<double>({1, 3}, {2, 1});
  Tensor rm = tensor<double>({10}), rv = tensor<double>({4});
  batch_norm(x, Tensor(), Tensor(), rm, rv, true, /*momentum=*/0.25);
  REQUIRE(rm.item() == Approx(0.75 * 10 + 0.25 * 2));
  REQUIRE(rv.item() == Approx(0.75 * 4 + 0.25 * 2));
  // Evaluation leaves them alone.
  batch_norm(x, Tensor(), Tensor(), rm, rv, false);
  REQUIRE(rm.item() == Approx(8.0));
}

TEST_CASE("batch_norm_backward is one op giving dx, dweight and dbias") {
  Tensor x = f64_randn({4, 2, 3}, 6), g = f64_randn({4, 2, 3}, 7), w = f64_randn({2}, 8);
  Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_(), br = zeros({2}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = batch_norm(xr, wr, br, Tensor(), Tensor(), true);
  sum(mul(y, g)).backward();
  Tensor m = mean(x, {0, 2});
  Tensor invstd = rsqrt(add(var(x, {0, 2}, 0), 1e-5));
  BatchNormGrads d = batch_norm_backward(g, x, w, m, invstd, true);
  require_close(d.dx, xr.grad(), 1e-12);
  require_close(d.dweight, wr.grad(), 1e-12);
  require_close(d.dbias, br.grad(), 1e-12);
  BatchNormGrads only_dx = batch_norm_backward(g, x, w, m, invstd, true, true, false, false);
  REQUIRE(only_dx.dx.defined());
  REQUIRE_FALSE(only_dx.dweight.defined());
  REQUIRE_FALSE(only_dx.dbias.defined());
}

TEST_CASE("batch_norm errors name the problem") {
  Tensor rm = zeros({3}), rv = ones({3});
  REQUIRE_THROWS_WITH(batch_norm(ones({1, 3}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("expected more than 1 value per channel when training, got input size (1, 3)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({1, 3, 1, 1}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("more than 1 value per channel"));
  REQUIRE_NOTHROW(batch_norm(ones({1, 3}), Tensor(), Tensor(), rm, rv, false));  // eval is fine
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), ones({4}), Tensor(), rm, rv, true),
                      Catch::Contains("weight of shape (3,)") && Catch::Contains("got (4,)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false),
                      Catch::Contains("needs running_mean and running_var"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4}), Tensor(), Tensor(), rm, rv, true), Catch::Contains("(N, C)"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), rm, Tensor(), true), Catch::Contains("neither"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}), Tensor(), Tensor(), zeros({3}, {.requires_grad = true}), rv, true),
                      Catch::Contains("must not require grad"));
  REQUIRE_THROWS_WITH(batch_norm(ones({4, 3}, {.dtype = DType::i64}), Tensor(), Tensor(), rm, rv, true),
                      Catch::Contains("floating"));
}
