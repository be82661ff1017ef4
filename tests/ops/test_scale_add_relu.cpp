// The fused SE tail scale_add_relu (ops/scale_add_relu.h): equal to the unfused composition in
// values and gradients, exact at the relu boundary, defined on empty tensors, clear errors, and
// its CUDA kernels equal to the CPU's on planes larger than a warp and more planes than the grid.
// The f64 gradchecks and the PyTorch values are cases of the op table (test_op_table.cpp).
#include "cuda/runtime.h"
#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::check_close;
using ember::test::error_of;

namespace {

Tensor unfused(const Tensor& x, const Tensor& s, const Tensor& r) {
  return relu(add(mul(x, s.view({s.size(0), s.size(1), 1, 1})), r));
}

// Values and the three gradients of scale_add_relu(x, s, r) and of `reference` under one upstream
// gradient, inputs on `device`.
struct Run {
  Tensor y, dx, ds, dr;
};
Run run(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& op, const Tensor& x,
        const Tensor& s, const Tensor& r, const Tensor& gy, Device device) {
  // Core refuses to copy some empty tensors between devices ("a copy between devices needs
  // contiguous tensors"), outside this op: empty inputs are made on the device, and an empty
  // result is checked by its shape.
  auto to_device = [&](const Tensor& t) {  // detached: never x itself
    return t.numel() == 0 ? Tensor::empty(t.shape(), {.dtype = t.dtype(), .device = device}) : t.detach().to(device);
  };
  auto leaf = [&](const Tensor& t) { return to_device(t).requires_grad_(); };
  Tensor xl = leaf(x), sl = leaf(s), rl = leaf(r);
  Tensor y = op(xl, sl, rl);
  sum(mul(y, to_device(gy))).backward();
  auto host = [](const Tensor& t) { return t.numel() == 0 ? zeros(t.shape(), {.dtype = t.dtype()}) : t.cpu(); };
  return {host(y), host(xl.grad()), host(sl.grad()), host(rl.grad())};
}

void check_runs_equal(const Run& a, const Run& b, double tol) {
  check_close(a.y, b.y, tol, tol);
  check_close(a.dx, b.dx, tol, tol);
  check_close(a.ds, b.ds, tol, tol);
  check_close(a.dr, b.dr, tol, tol);
}

}  // namespace

TEST_CASE("scale_add_relu equals relu(x * s + residual) in values and gradients", "[scale_add_relu]") {
  Generator gen(11);
  // 7 x 7 planes (a tail shorter than the CPU's 16 lanes) and 9 x 9 ones.
  for (const Shape& shape : {Shape{3, 5, 7, 7}, Shape{2, 4, 9, 9}}) {
    for (DType dtype : {DType::f32, DType::f64}) {
      INFO(shape_str(shape) << " " << dtype_name(dtype));
      const Tensor x = randn(shape, {.dtype = dtype}, &gen), r = randn(shape, {.dtype = dtype}, &gen);
      const Tensor s = randn({shape[0], shape[1]}, {.dtype = dtype}, &gen), gy = randn(shape, {.dtype = dtype}, &gen);
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
      check_runs_equal(run(scale_add_relu, x, s, r, gy, Device::cpu()), run(unfused, x, s, r, gy, Device::cpu()), tol);
    }
  }
}

TEST_CASE("scale_add_relu at the relu boundary: y = 0 passes no gradient", "[scale_add_relu]") {
  // Plane 0 (s = 2): x * s + r = 0, -1, 1, 0 exactly; plane 1 (s = -1): 0.5, 0, -0.5, 2.
  const Tensor x = tensor<double>({1, 0, 1, -0.5, 0.5, 1, 1, -1}, {1, 2, 2, 2});
  const Tensor r = tensor<double>({-2, -1, -1, 1, 1, 1, 0.5, 1}, {1, 2, 2, 2});
  const Tensor s = tensor<double>({2, -1}, {1, 2});
  const Tensor gy = tensor<double>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2});
  const Run got = run(scale_add_relu, x, s, r, gy, Device::cpu());
  check_close(got.y, tensor<double>({0, 0, 1, 0, 0.5, 0, 0, 2}, {1, 2, 2, 2}), 0, 0);
  const Tensor mask = tensor<double>({0, 0, 1, 0, 1, 0, 0, 1}, {1, 2, 2, 2});
  check_close(got.dr, mul(gy, mask), 0, 0);
  check_close(got.dx, tensor<double>({0, 0, 6, 0, -5, 0, 0, -8}, {1, 2, 2, 2}), 0, 0);
  check_close(got.ds, tensor<double>({3, 2.5 - 8}, {1, 2}), 0, 0);  // 3 * 1; 5 * 0.5 + 8 * (-1)
  if (cuda::is_available()) check_runs_equal(run(scale_add_relu, x, s, r, gy, Device::cuda()), got, 0);
}

TEST_CASE("scale_add_relu on empty tensors: empty outputs, dscale 0 over empty planes", "[scale_add_relu]") {
  std::vector<Device> devices{Device::cpu()};
  if (cuda::is_available()) devices.push_back(Device::cuda());
  for (Device device : devices) {
    for (const Shape& shape : {Shape{0, 3, 4, 4}, Shape{2, 0, 4, 4}, Shape{2, 3, 0, 5}}) {
      INFO(shape_str(shape) << " on " << device);
      const Tensor x = ones(shape), r = ones(shape), s = full({shape[0], shape[1]}, 7.0), gy = ones(shape);
      const Run got = run(scale_add_relu, x, s, r, gy, device);
      CHECK(got.y.shape() == shape);
      CHECK(got.dx.shape() == shape);
      CHECK(got.dr.shape() == shape);
      CHECK(got.ds.shape() == Shape{shape[0], shape[1]});
      check_close(got.ds, zeros({shape[0], shape[1]}), 0, 0);
    }
  }
}

TEST_CASE("scale_add_relu: only the wanted gradients are computed", "[scale_add_relu]") {
  Generator gen(12);
  const Tensor x = randn({2, 3, 4, 5}, {}, &gen), r = randn({2, 3, 4, 5}, {}, &gen), s = randn({2, 3}, {}, &gen);
  const Tensor y = scale_add_relu(x, s, r), g = randn(y.shape(), {}, &gen);
  const ScaleAddReluGrad all = scale_add_relu_backward(g, y, x, s, true, true, true);
  const ScaleAddReluGrad only_scale = scale_add_relu_backward(g, y, x, s, false, true, false);
  CHECK_FALSE(only_scale.x.defined());
  CHECK_FALSE(only_scale.residual.defined());
  check_close(only_scale.scale, all.scale, 0, 0);
  const ScaleAddReluGrad only_x = scale_add_relu_backward(g, y, x, s, true, false, false);
  check_close(only_x.x, all.x, 0, 0);
  CHECK_FALSE(only_x.scale.defined());
}

TEST_CASE("scale_add_relu reports bad input with the op and the shapes", "[scale_add_relu][errors]") {
  const Tensor x = zeros({2, 3, 4, 4}), s = zeros({2, 3});
  CHECK_THAT(error_of([&] { scale_add_relu(x, zeros({3, 2}), x); }),
             Catch::Contains("scale_add_relu") && Catch::Contains("(N, C) = (2, 3)") && Catch::Contains("scale (3, 2)"));
  CHECK_THAT(error_of([&] { scale_add_relu(x, s, zeros({2, 3, 4, 5})); }),
             Catch::Contains("residual of x's shape") && Catch::Contains("residual (2, 3, 4, 5)"));
  CHECK_THAT(error_of([&] { scale_add_relu(zeros({2, 3, 4}), s, zeros({2, 3, 4})); }),
             Catch::Contains("rank 4") && Catch::Contains("x (2, 3, 4)"));
  CHECK_THAT(error_of([&] { scale_add_relu(x, s.to(DType::f64), x); }), Catch::Contains("one dtype"));
  CHECK_THAT(error_of([&] { scale_add_relu(x.to(DType::i64), s.to(DType::i64), x.to(DType::i64)); }),
             Catch::Contains("floating"));
  CHECK_THAT(error_of([&] { scale_add_relu_backward(zeros({2, 3, 4, 5}), x, x, s, true, true, true); }),
             Catch::Contains("scale_add_relu_backward") && Catch::Contains("grad of x's shape"));
}

TEST_CASE("scale_add_relu on cuda equals the CPU (more planes than the grid, planes longer than a warp)",
          "[scale_add_relu][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  Generator gen(13);
  for (const Shape& shape : {Shape{3, 40, 7, 7}, Shape{1, 3, 10, 11}}) {
    INFO(shape_str(shape));
    const Tensor x = randn(shape, {.dtype = DType::f64}, &gen), r = randn(shape, {.dtype = DType::f64}, &gen);
    const Tensor s = randn({shape[0], shape[1]}, {.dtype = DType::f64}, &gen);
    const Tensor gy = randn(shape, {.dtype = DType::f64}, &gen);
    check_runs_equal(run(scale_add_relu, x, s, r, gy, Device::cuda()), run(scale_add_relu, x, s, r, gy, Device::cpu()),
                     1e-12);
  }
}
