// CUDA convolution, pooling and linear kernels against the CPU kernels on the same inputs
// (run on the SIMT simulator; small shapes, since every CUDA thread is an OS thread there).
// Tolerances: f32 products of up to ~100 terms summed in another order, rtol 1e-4 / atol 1e-5;
// f64 1e-12.
#include "ops/cuda/conv.h"
#include "nn_test_support.h"
#include "support/test_support.h"

using namespace ember;
using test::all_close;
using test::to_cpu;
using test::to_cuda;

namespace {

struct ConvCase {
  const char* name;
  Shape x, w;
  IntPair stride, padding, dilation;
  int64_t groups;
  bool bias;
  Activation act = Activation::none;  // fused into the forward; its backward runs with the bias gradient
};

// dz and db of the fused bias + activation backward on both devices; y is the activated output.
void check_bias_activation_backward(Activation act, const Tensor& dy, const Tensor& y, bool bias, double rtol,
                                    double atol) {
  INFO("bias + " << activation_name(act) << " backward, bias gradient " << bias);
  const bool activated = act != Activation::none;
  const Tensor dz = activated ? empty(dy.shape(), {.dtype = dy.dtype()}) : Tensor();
  const Tensor dzd = activated ? test::empty_cuda(dy.shape(), dy.dtype()) : Tensor();
  const Tensor db = bias ? empty({dy.size(1)}, {.dtype = dy.dtype()}) : Tensor();
  const Tensor dbd = bias ? test::empty_cuda({dy.size(1)}, dy.dtype()) : Tensor();
  bias_activation_backward_kernel(Device::cpu(), act, dy, activated ? y : Tensor(), dz, db);
  bias_activation_backward_kernel(Device::cuda(), act, to_cuda(dy), activated ? to_cuda(y) : Tensor(), dzd, dbd);
  if (activated) CHECK_THAT(to_cpu(dzd), all_close(dz, rtol, atol));
  if (bias) CHECK_THAT(to_cpu(dbd), all_close(db, rtol, atol));
}

void check_conv(const ConvCase& c, DType dtype, double rtol, double atol) {
  INFO(c.name << " " << dtype_name(dtype) << " " << activation_name(c.act));
  Generator gen(11);
  const Conv2dGeometry g = conv2d_geometry(c.x, c.w, c.stride, c.padding, c.dilation, c.groups);
  const Tensor x = randn(c.x, {.dtype = dtype}, &gen), w = randn(c.w, {.dtype = dtype}, &gen);
  const Tensor b = c.bias ? randn({c.w[0]}, {.dtype = dtype}, &gen) : Tensor();
  const Shape y_shape{g.batch, g.out_channels, g.out_h, g.out_w};
  const Tensor dy = randn(y_shape, {.dtype = dtype}, &gen);
  const Tensor xd = to_cuda(x), wd = to_cuda(w), bd = to_cuda(b), dyd = to_cuda(dy);

  Tensor y = empty(y_shape, {.dtype = dtype}), yd = test::empty_cuda(y_shape, dtype);
  conv2d_forward_kernel(Device::cpu(), g, x, w, b, c.act, y, nullptr);
  conv2d_forward_kernel(Device::cuda(), g, xd, wd, bd, c.act, yd, nullptr);
  CHECK_THAT(to_cpu(yd), all_close(y, rtol, atol));

  Tensor dx = empty(c.x, {.dtype = dtype}), dxd = test::empty_cuda(c.x, dtype);
  conv2d_input_grad_kernel(Device::cpu(), g, dy, w, dx);
  conv2d_input_grad_kernel(Device::cuda(), g, dyd, wd, dxd);
  CHECK_THAT(to_cpu(dxd), all_close(dx, rtol, atol));

  Tensor dw = empty(c.w, {.dtype = dtype}), dwd = test::empty_cuda(c.w, dtype);
  conv2d_weight_grad_kernel(Device::cpu(), g, x, dy, dw);
  conv2d_weight_grad_kernel(Device::cuda(), g, xd, dyd, dwd);
  CHECK_THAT(to_cpu(dwd), all_close(dw, rtol, atol));

  const Shape as_3d{g.batch, g.out_channels, g.out_h * g.out_w};
  check_bias_activation_backward(c.act, dy.view(as_3d), y.view(as_3d), true, rtol, atol);
  if (c.act != Activation::none) check_bias_activation_backward(c.act, dy.view(as_3d), y.view(as_3d), false, rtol, atol);
}

}  // namespace

TEST_CASE("cuda conv2d forward, input, weight and bias gradients match the CPU") {
  const ConvCase cases[] = {
      {"3x3 padded", {2, 3, 6, 5}, {4, 3, 3, 3}, 1, 1, 1, 1, true},
      {"3x3 padded, relu", {2, 3, 6, 5}, {4, 3, 3, 3}, 1, 1, 1, 1, true, Activation::relu},
      {"stride 2, dilation 2, no bias", {2, 2, 9, 8}, {3, 2, 3, 3}, 2, 2, 2, 1, false},
      {"groups 2, asymmetric, tanh", {1, 4, 7, 6}, {6, 2, 3, 2}, IntPair{2, 1}, IntPair{1, 0}, 1, 2, true,
       Activation::tanh},
      {"depthwise", {2, 4, 5, 5}, {4, 1, 3, 3}, 1, 1, 1, 4, true},
      {"pointwise, sigmoid", {2, 6, 4, 3}, {5, 6, 1, 1}, 1, 0, 1, 1, true, Activation::sigmoid},
      {"pointwise grouped", {1, 4, 3, 3}, {4, 2, 1, 1}, 1, 0, 1, 2, false},
      {"strided 1x1", {1, 3, 5, 5}, {2, 3, 1, 1}, 2, 0, 1, 1, true},
  };
  for (const ConvCase& c : cases) check_conv(c, DType::f32, 1e-4, 1e-5);
}

TEST_CASE("cuda conv2d in f64 matches the CPU to rounding") {
  check_conv({"f64 grouped dilated", {2, 4, 6, 6}, {4, 2, 2, 3}, 1, IntPair{1, 2}, IntPair{2, 1}, 2, true,
              Activation::relu},
             DType::f64, 1e-12, 1e-12);
}

TEST_CASE("cuda conv2d split into chunks of images (small column budget) matches the CPU") {
  // 2 images' columns per chunk: batch 5 runs as chunks of 2, 2 and 1, and the weight gradient
  // accumulates across them.
  const ConvCase c{"chunked", {5, 2, 5, 4}, {3, 2, 3, 3}, 1, 1, 1, 1, true};
  const Conv2dGeometry g = conv2d_geometry(c.x, c.w, c.stride, c.padding, c.dilation, c.groups);
  struct RestoreBudget {
    ~RestoreBudget() { cuda::set_conv2d_column_budget(int64_t(128) << 20); }
  } restore;
  cuda::set_conv2d_column_budget(2 * cuda::conv2d_column_elements(g) * int64_t(sizeof(float)));
  REQUIRE(cuda::conv2d_column_images(g, sizeof(float)) == 2);
  check_conv(c, DType::f32, 1e-4, 1e-5);
}

TEST_CASE("cuda linear forward and its bias + activation backward match the CPU") {
  // 33 output columns: the column kernel of the backward covers them with a full and a partial block.
  Generator gen(3);
  const Tensor x = randn({5, 37}, {}, &gen), w = randn({33, 37}, {}, &gen), b = randn({33}, {}, &gen);
  const Tensor dy = randn({5, 33}, {}, &gen);
  for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh}) {
    for (const Tensor& bias : {b, Tensor()}) {
      INFO(activation_name(act) << (bias.defined() ? " with bias" : " without bias"));
      Tensor y = empty({5, 33}), yd = test::empty_cuda({5, 33});
      linear_forward_kernel(Device::cpu(), x, w, bias, act, y);
      linear_forward_kernel(Device::cuda(), to_cuda(x), to_cuda(w), to_cuda(bias), act, yd);
      CHECK_THAT(to_cpu(yd), all_close(y, 1e-4, 1e-5));
      if (act != Activation::none || bias.defined())
        check_bias_activation_backward(act, dy.view({5, 33, 1}), y.view({5, 33, 1}), bias.defined(), 1e-5, 1e-6);
    }
  }
}

namespace {

// Runs a pooling forward and backward on both devices: fwd(device, x, y), bwd(device, dy, dx).
template <class Forward, class Backward>
void check_pool(const Shape& x_shape, const Shape& y_shape, Forward fwd, Backward bwd, bool nan_input = false) {
  Generator gen(5);
  Tensor x = randn(x_shape, {}, &gen);
  if (nan_input) x.data<float>()[7] = NAN;
  const Tensor dy = randn(y_shape, {}, &gen);
  Tensor y = empty(y_shape), yd = test::empty_cuda(y_shape);
  fwd(Device::cpu(), x, y);
  fwd(Device::cuda(), to_cuda(x), yd);
  CHECK_THAT(to_cpu(yd), all_close(y, 1e-6, 1e-6));
  Tensor dx = empty(x_shape), dxd = test::empty_cuda(x_shape);
  bwd(Device::cpu(), dy, dx);
  bwd(Device::cuda(), to_cuda(dy), dxd);
  CHECK_THAT(to_cpu(dxd), all_close(dx, 1e-6, 1e-6));
}

}  // namespace

TEST_CASE("cuda max_pool2d forward (values and indices) and backward match the CPU") {
  struct Case {
    IntPair kernel, stride, padding;
    bool nan;
  };
  for (const Case& c : {Case{3, 2, 1, false}, Case{2, 2, 0, true}, Case{IntPair{3, 2}, 1, IntPair{1, 0}, false}}) {
    const Shape xs{2, 3, 7, 6};
    const Pool2dGeometry g = pool2d_geometry(xs, c.kernel, c.stride, c.padding, "max_pool2d");
    const Shape ys{2, 3, g.out_h, g.out_w};
    Tensor idx = empty(ys, {.dtype = DType::i64}), idxd = test::empty_cuda(ys, DType::i64);
    check_pool(
        xs, ys,
        [&](Device d, const Tensor& x, const Tensor& y) {
          max_pool2d_forward_kernel(d, g, x, y, d.is_cpu() ? idx : idxd);
        },
        [&](Device d, const Tensor& dy, const Tensor& dx) {
          max_pool2d_backward_kernel(d, g, dy, d.is_cpu() ? idx : idxd, dx);
        },
        c.nan);
    CHECK(to_cpu(idxd).to_vector<int64_t>() == idx.to_vector<int64_t>());
  }
}

TEST_CASE("cuda avg_pool2d forward and backward match the CPU, with and without counting padding") {
  for (bool count_pad : {true, false}) {
    const Shape xs{2, 2, 7, 5};
    const Pool2dGeometry g = pool2d_geometry(xs, 3, IntPair{2, 1}, 1, "avg_pool2d");
    check_pool(
        xs, {2, 2, g.out_h, g.out_w},
        [&](Device d, const Tensor& x, const Tensor& y) { avg_pool2d_forward_kernel(d, g, count_pad, x, y); },
        [&](Device d, const Tensor& dy, const Tensor& dx) { avg_pool2d_backward_kernel(d, g, count_pad, dy, dx); });
  }
}

TEST_CASE("cuda adaptive_avg_pool2d forward and backward match the CPU (overlapping and global windows)") {
  for (const Shape& ys : {Shape{2, 3, 3, 2}, Shape{2, 3, 1, 1}, Shape{2, 3, 5, 4}}) {
    check_pool(
        {2, 3, 5, 7}, ys, [&](Device d, const Tensor& x, const Tensor& y) { adaptive_avg_pool2d_forward_kernel(d, x, y); },
        [&](Device d, const Tensor& dy, const Tensor& dx) { adaptive_avg_pool2d_backward_kernel(d, dy, dx); });
  }
}
