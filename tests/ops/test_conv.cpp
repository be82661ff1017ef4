// conv2d beyond the op table (tests/ops/test_op_table.cpp has its PyTorch values, gradients and
// gradchecks for every mode): a large batch, an empty batch, the backward ops against autograd,
// every col2im path of the input gradient, and the errors a user can cause.
#include <cmath>
#include <limits>
#include <iterator>
#include <string>
#include <vector>

#include "ember.h"
#include "ops/cpu/conv_direct.h"
#include "ops/kernels.h"
#include "support/test_support.h"

using namespace ember;
using ember::test::check_close;
using ember::test::error_of;

TEST_CASE("conv2d over a large batch equals conv2d one image at a time", "[conv]") {
  // Forward and weight gradient build 14-row column slices (the 512 KiB slice cap), 5 per image;
  // the input gradient folds each image's columns as soon as its GEMM has written them.
  Tensor x = randn({30, 16, 64, 64}).requires_grad_();
  Tensor w = randn({4, 16, 3, 3}).requires_grad_();
  Tensor b = randn({4}).requires_grad_();
  Tensor y = conv2d(x, w, b, 1, 1);
  Tensor gy = randn(y.shape());
  sum(mul(y, gy)).backward();
  for (int64_t n : {0, 17, 29}) {
    Tensor xn = x.detach().narrow(0, n, 1).requires_grad_();
    Tensor yn = conv2d(xn, w.detach(), b.detach(), 1, 1);
    INFO("image " << n);
    check_close(y.detach().narrow(0, n, 1), yn, 1e-4, 1e-4);
    Tensor wn = w.detach().requires_grad_();
    sum(mul(conv2d(xn, wn, {}, 1, 1), gy.narrow(0, n, 1))).backward();
    check_close(x.grad().narrow(0, n, 1), xn.grad(), 1e-4, 1e-4);
  }
  // dw over the whole batch against the sum of its halves.
  Tensor w1 = w.detach().requires_grad_();
  sum(mul(conv2d(x.detach().narrow(0, 0, 15), w1, {}, 1, 1), gy.narrow(0, 0, 15))).backward();
  Tensor dw_first = w1.grad();
  Tensor w2 = w.detach().requires_grad_();
  sum(mul(conv2d(x.detach().narrow(0, 15, 15), w2, {}, 1, 1), gy.narrow(0, 15, 15))).backward();
  check_close(w.grad(), add(dw_first, w2.grad()), /*rtol=*/1e-4, /*atol=*/2e-3);
  check_close(b.grad(), sum(gy, {0, 2, 3}), /*rtol=*/1e-4, /*atol=*/1e-3);
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
  check_close(conv2d_input_grad(gy, w.detach(), x.shape(), {2, 1}, {1, 0}, {1, 2}, 2), x.grad(), 0, 1e-12);
  check_close(conv2d_weight_grad(x.detach(), gy, w.shape(), {2, 1}, {1, 0}, {1, 2}, 2), w.grad(), 0, 1e-12);
  check_close(conv2d_bias_grad(gy), sum(gy, {0, 2, 3}), 1e-12, 1e-12);
}

TEST_CASE("conv2d's f32 and bf16 input gradients match f64 on every col2im path", "[conv]") {
  // f32 and bf16 fold their columns 16 pixels at a time in registers where the row stride is 1
  // (Note [col2im in registers]); f64 and stride 2 rows take the portable loop; f32 grouped
  // layers with 4 to 32 input channels per group and stride 1 take the direct forward. Widths under,
  // at and over one 16-pixel block, taps that miss the image (padding 2 with a 3-wide kernel),
  // dilation, a vertical stride, groups.
  struct Case {
    Shape x, w;
    IntPair stride, pad, dilation;
    int64_t groups;
  };
  const Case cases[] = {
      {{2, 8, 14, 14}, {8, 2, 3, 3}, 1, 1, 1, 4},  {{1, 3, 7, 7}, {4, 3, 3, 3}, 1, 1, 1, 1},
      {{1, 4, 9, 16}, {4, 4, 3, 3}, 1, 1, 1, 1},   {{1, 4, 6, 33}, {6, 2, 3, 5}, 1, {1, 2}, 1, 2},
      {{1, 2, 8, 17}, {2, 2, 3, 3}, 1, 2, 1, 1},   {{1, 2, 11, 20}, {3, 2, 3, 3}, 1, 2, 2, 1},
      {{2, 4, 12, 18}, {4, 1, 3, 3}, {2, 1}, 1, 1, 4}, {{1, 2, 9, 19}, {2, 2, 3, 3}, 2, 1, 1, 1},
      // Grouped, stride 1, 4 / 8 / 16 input channels per group: the direct forward of the
      // transposed problem (Note [Direct input gradient as a forward]), and padding wider than
      // the kernel reaches, which it cannot take.
      {{2, 16, 14, 14}, {16, 4, 3, 3}, 1, 1, 1, 4},  {{1, 32, 9, 20}, {8, 8, 3, 3}, 1, 2, 2, 4},
      {{1, 32, 6, 33}, {64, 16, 3, 3}, 1, {1, 0}, 1, 2}, {{1, 16, 8, 8}, {8, 8, 3, 3}, 1, 3, 1, 2},
      // 1x1: no columns in f32; bf16 rounds its f32 columns straight into dx (grouped too); and
      // a stride of 2, whose columns scatter.
      {{2, 8, 5, 7}, {6, 4, 1, 1}, 1, 0, 1, 2}, {{1, 16, 9, 9}, {8, 16, 1, 1}, 1, 0, 1, 1},
      {{1, 8, 9, 9}, {4, 8, 1, 1}, 2, 0, 1, 1},
  };
  Generator gen(5);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    const Tensor w = randn(c.w, {.dtype = DType::f64}, &gen);
    const Shape y_shape = conv2d(zeros(c.x, {.dtype = DType::f64}), w, {}, c.stride, c.pad, c.dilation, c.groups).shape();
    const Tensor dy = randn(y_shape, {.dtype = DType::f64}, &gen);
    const Tensor want = conv2d_input_grad(dy, w, c.x, c.stride, c.pad, c.dilation, c.groups);
    const Tensor f32 = conv2d_input_grad(dy.to(DType::f32), w.to(DType::f32), c.x, c.stride, c.pad, c.dilation, c.groups);
    check_close(f32.to(DType::f64), want, 1e-4, 1e-4);  // f32 sums of up to 288 terms
    const Tensor bf16 =
        conv2d_input_grad(dy.to(DType::bf16), w.to(DType::bf16), c.x, c.stride, c.pad, c.dilation, c.groups);
    const Tensor want_bf16 = conv2d_input_grad(dy.to(DType::bf16).to(DType::f64), w.to(DType::bf16).to(DType::f64), c.x,
                                               c.stride, c.pad, c.dilation, c.groups);
    check_close(bf16.to(DType::f64), want_bf16, 1e-2, 1e-2);
  }
}

namespace {

// conv2d with `groups` against one ungrouped conv2d per group in f64 (im2col + GEMM: the direct
// and padded-grid algorithms take no f64, and ungrouped f32 layers may take the grid too): the
// values, and the gradients of x, w and b (when defined) under a random upstream gradient.
void check_against_one_conv_per_group(const Tensor& x0, const Tensor& w0, const Tensor& b0, IntPair stride,
                                      IntPair pad, IntPair dilation, int64_t groups, Activation act, Generator& gen) {
  const int64_t per_group_in = x0.shape()[1] / groups, per_group_out = w0.shape()[0] / groups;
  const bool bias = b0.defined();
  auto f64 = [](const Tensor& t) { return t.to(DType::f64).detach().requires_grad_(); };
  Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  Tensor xs = f64(x0), ws = f64(w0);
  Tensor b = bias ? b0.detach().requires_grad_() : Tensor(), bs = bias ? f64(b0) : Tensor();
  const Tensor y = conv2d(x, w, b, stride, pad, dilation, groups, act);
  std::vector<Tensor> parts;
  const auto xg = split(xs, per_group_in, 1), wg = split(ws, per_group_out, 0);
  for (int64_t k = 0; k < groups; ++k) {
    const Tensor bk = bias ? bs.narrow(0, k * per_group_out, per_group_out) : Tensor();
    parts.push_back(conv2d(xg[size_t(k)], wg[size_t(k)], bk, stride, pad, dilation, 1, act));
  }
  const Tensor reference = cat(parts, 1);
  check_close(y.to(DType::f64), reference, 1e-5, cpu::conv2d_grid_takes(DType::f32) ? 1e-5 : 1e-4);  // other sums
  const Tensor gy = randn(y.shape(), {}, &gen);
  sum(mul(y, gy)).backward();
  sum(mul(reference, gy.to(DType::f64))).backward();
  check_close(x.grad().to(DType::f64), xs.grad(), 1e-4, 1e-4);
  check_close(w.grad().to(DType::f64), ws.grad(), 1e-4, 1e-4);
  if (bias) check_close(b.grad().to(DType::f64), bs.grad(), 1e-4, 1e-4);
}

// Random input, weights and (when `bias`) bias of a layer of `groups` groups of per_group_in ->
// per_group_out channels.
struct GroupedLayer {
  Tensor x, w, b;
};
GroupedLayer random_grouped_layer(int64_t batch, int64_t groups, int64_t per_group_in, int64_t per_group_out,
                                  int64_t h, int64_t w, IntPair kernel, bool bias, Generator& gen) {
  GroupedLayer layer;
  layer.x = randn({batch, groups * per_group_in, h, w}, {}, &gen);
  layer.w = randn({groups * per_group_out, per_group_in, kernel.h, kernel.w}, {}, &gen);
  layer.b = bias ? randn({groups * per_group_out}, {}, &gen) : Tensor();
  return layer;
}

// Each pass's algorithm where this build has the padded grid (AVX-512); a warning otherwise.
void check_algorithms(const Conv2dGeometry& g, Activation act, const std::string& forward,
                      const std::string& input_grad, const std::string& weight_grad) {
  if (!cpu::conv2d_direct_forward_suits(g, DType::f32, act)) {
    WARN("this build's CPU path has no padded grid (it needs AVX-512); only the values are checked");
    return;
  }
  CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::forward)) == forward);
  CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::input_grad)) == input_grad);
  CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::weight_grad)) == weight_grad);
}

// The same bits at another thread count where the padded grid runs (no task splits a sum); without
// it (EMBER_NATIVE=OFF) im2col + GEMM's weight gradient sums per-thread image chunks: close values.
void check_same_at_any_thread_count(const Tensor& one_thread, const Tensor& more_threads) {
  if (cpu::conv2d_grid_takes(DType::f32)) CHECK(max(abs(sub(one_thread, more_threads))).item() == 0.0);
  else check_close(more_threads.to(DType::f64), one_thread.to(DType::f64), 1e-4, 1e-3);  // sums of 13,056
}

}  // namespace

TEST_CASE("conv2d's direct grouped passes equal one ungrouped convolution per group", "[conv][direct]") {
  // Note [Direct grouped forward], [Direct input gradient as a forward], [Direct grouped weight
  // gradient]: blocks of 4, 8 and 16 channels (32 is two blocks), rows under, at and over one
  // 16-pixel block, taps outside the image, dilation, a vertical stride, with and without bias
  // and ReLU.
  struct Case {
    int64_t per_group_in, per_group_out, h, w;
    IntPair stride, pad, dilation;
    bool bias;
    Activation act;
  };
  const Case cases[] = {
      {4, 4, 9, 14, 1, 1, 1, true, Activation::relu},     {8, 8, 7, 7, 1, 1, 1, false, Activation::none},
      {3, 16, 6, 17, 1, 2, 1, true, Activation::none},    {16, 32, 5, 33, 1, 1, 1, true, Activation::relu},
      {2, 4, 11, 16, {2, 1}, 1, 1, false, Activation::relu}, {4, 8, 10, 20, 1, 2, 2, true, Activation::none},
      {1, 4, 8, 9, 1, 0, 1, true, Activation::relu},      {8, 24, 12, 12, 1, 1, 1, false, Activation::none},
  };
  Generator gen(8);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    const int64_t G = 3;
    const Tensor x0 = randn({2, G * c.per_group_in, c.h, c.w}, {}, &gen);
    const Tensor w0 = randn({G * c.per_group_out, c.per_group_in, 3, 3}, {}, &gen);
    const Tensor b0 = c.bias ? randn({G * c.per_group_out}, {}, &gen) : Tensor();
    const Conv2dGeometry g = conv2d_geometry(x0.shape(), w0.shape(), c.stride, c.pad, c.dilation, G);
    if (!cpu::conv2d_direct_forward_suits(g, DType::f32, c.act)) {
      WARN("this build's CPU path has no direct forward (it needs AVX-512); only the values are checked");
    } else {
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::forward)) ==
            (cpu::conv2d_grid_forward_suits(g) ? "padded grid" : "direct"));
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::weight_grad)) ==
            (cpu::conv2d_grid_weight_grad_suits(g, DType::f32)     ? "padded grid"
             : cpu::conv2d_direct_weight_grad_suits(g, DType::f32) ? "direct"
                                                                   : "im2col+gemm"));
    }
    check_against_one_conv_per_group(x0, w0, b0, c.stride, c.pad, c.dilation, G, c.act, gen);
  }
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

// Note [Conv algorithms] (ops/cpu/conv.cpp): grouped layers with 2 and 4 channels per group (SE-ResNeXt's
// first stage) take the direct algorithm or the padded grid forward and backward to the input (the
// scalar direct input gradient where AVX-512 is missing); its values and both gradients equal those of
// one ungrouped convolution per group (im2col + GEMM), stride 1 and 2, with bias and relu.
TEST_CASE("conv2d's direct grouped algorithm equals one ungrouped convolution per group", "[conv][direct]") {
  Generator gen(21);
  for (int64_t per_group : {2, 4}) {
    for (int64_t stride : {1, 2}) {
      const int64_t G = 4, C = G * per_group;
      INFO(per_group << " channels per group, stride " << stride);
      const Tensor x0 = randn({2, C, 9, 35}, {}, &gen), w0 = randn({C, per_group, 3, 3}, {}, &gen);
      const Tensor b0 = randn({C}, {}, &gen);
      const Conv2dGeometry g = conv2d_geometry(x0.shape(), w0.shape(), stride, 1, 1, G);
      const bool direct_forward = cpu::conv2d_direct_forward_suits(g, DType::f32, Activation::relu);
      const bool grid_forward = direct_forward && cpu::conv2d_grid_forward_suits(g);
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::forward)) ==
            (grid_forward ? "padded grid" : direct_forward ? "direct" : "im2col+gemm"));
      const bool grid_input_grad = (stride == 1 && cpu::conv2d_direct_input_grad_suits(g, DType::f32) &&
                                    cpu::conv2d_direct_input_grad_on_grid(g)) ||
                                   cpu::conv2d_grid_input_grad_suits(g, DType::f32);
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::input_grad)) ==
            (grid_input_grad ? "padded grid" : "direct"));
      check_against_one_conv_per_group(x0, w0, b0, stride, 1, 1, G, Activation::relu, gen);
    }
  }
}

// Note [Thin groups on the grid], [Strided grid] (ops/cpu/conv_grid_avx512.cpp), [Strided input
// gradient as phase forwards] (ops/cpu/conv_grid_input_grad_avx512.cpp): depthwise and 2-channel
// groups at stride 1, groups of 1 to 8 channels at strides 2, 3 and (2, 1) / (1, 2), a kernel
// smaller than the stride (phases without taps), a 5 x 5 kernel, padding 0 to 2, odd planes whose
// rows end inside a vector, against one ungrouped convolution per group; and the same bits at 1,
// 2 and 3 threads.
TEST_CASE("conv2d's thin-group and strided padded-grid passes equal one ungrouped convolution per group",
          "[conv][direct]") {
  struct Case {
    int64_t per_group_in, per_group_out, batch, h, w;
    IntPair kernel, stride, pad;
    bool bias;
    Activation act;
  };
  const Case cases[] = {
      {1, 1, 2, 10, 13, 3, 1, 1, true, Activation::relu},   {2, 2, 2, 9, 9, 3, 1, 1, false, Activation::none},
      {1, 2, 2, 11, 12, 3, 2, 1, true, Activation::none},   {2, 2, 3, 16, 16, 3, 2, 1, false, Activation::relu},
      {4, 4, 2, 9, 7, 3, 2, 1, true, Activation::none},     {2, 4, 2, 8, 10, 3, {2, 1}, 1, false, Activation::none},
      {4, 8, 2, 12, 11, 5, 2, 2, true, Activation::relu},   {8, 8, 2, 8, 8, 3, 2, 1, false, Activation::none},
      {2, 2, 2, 13, 11, 3, 3, 0, true, Activation::none},   {2, 2, 2, 9, 8, 1, 2, 0, false, Activation::none},
      {1, 1, 2, 7, 7, 2, 2, 0, true, Activation::none},     {1, 1, 2, 6, 21, 3, {1, 2}, 1, false, Activation::none},
      {16, 16, 1, 7, 7, 3, 2, 1, false, Activation::none},  {1, 1, 2, 9, 9, 3, 2, 2, true, Activation::none},
      {1, 1, 1, 40, 37, 3, 2, 1, false, Activation::none},
  };
  Generator gen(89);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    const int64_t G = 3;
    const GroupedLayer l =
        random_grouped_layer(c.batch, G, c.per_group_in, c.per_group_out, c.h, c.w, c.kernel, c.bias, gen);
    const Conv2dGeometry g = conv2d_geometry(l.x.shape(), l.w.shape(), c.stride, c.pad, 1, G);
    check_algorithms(g, c.act, "padded grid", "padded grid", "padded grid");
    check_against_one_conv_per_group(l.x, l.w, l.b, c.stride, c.pad, 1, G, c.act, gen);
  }
  const int before = num_threads();
  for (size_t i : {0, 3, 6, 14}) {
    const Case& c = cases[i];
    INFO("case " << i << " at 1, 2 and 3 threads");
    const int64_t G = 3;
    const auto [x, w, b] =
        random_grouped_layer(c.batch, G, c.per_group_in, c.per_group_out, c.h, c.w, c.kernel, /*bias=*/true, gen);
    const Tensor gy = randn(conv2d(x, w, b, c.stride, c.pad, 1, G).shape(), {}, &gen);
    std::vector<Tensor> results[3];
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor xv = x.detach().requires_grad_(), wv = w.detach().requires_grad_(), bv = b.detach().requires_grad_();
      const Tensor y = conv2d(xv, wv, bv, c.stride, c.pad, 1, G, c.act);
      sum(mul(y, gy)).backward();
      results[threads - 1] = {y, xv.grad(), wv.grad(), bv.grad()};
    }
    set_num_threads(before);
    for (int threads : {2, 3})
      for (size_t r = 0; r < 4; ++r) {
        INFO(threads << " threads, result " << r << " (y, dx, dw, db)");
        check_same_at_any_thread_count(results[0][r], results[threads - 1][r]);
      }
  }
}

// Note [Direct forward on a padded grid], [Weight gradient on a padded grid] (ops/cpu/
// conv_grid_avx512.cpp): planes from 1 x 1 to 64 x 64 (a grid of 1 to 3 vectors per tile and
// the 2 + 2 tail), 8 to 32 output channels per group, 8 or more input channels per group (the
// input gradient's transposed problem on the grid too), padding 0 to 2, dilation 2, kernels of
// 2 x 2, 3 x 3 and 5 x 3 (tap counts that leave the weight gradient's 6-tap tiles a tail), and
// a batch whose weight gradient takes two chunks of images.
TEST_CASE("conv2d's padded-grid passes equal one ungrouped convolution per group", "[conv][direct]") {
  struct Case {
    int64_t per_group_in, per_group_out, batch, h, w;
    IntPair kernel, pad, dilation;
    bool bias;
    Activation act;
  };
  const Case cases[] = {
      {8, 8, 2, 7, 7, 3, 1, 1, true, Activation::relu},       {16, 16, 2, 14, 14, 3, 1, 1, false, Activation::none},
      {32, 32, 1, 7, 7, 3, 1, 1, true, Activation::none},     {4, 8, 2, 10, 13, 3, 2, 2, true, Activation::relu},
      {8, 24, 2, 6, 20, 3, 0, 1, false, Activation::none},    {8, 12, 1, 5, 5, 3, 1, 1, true, Activation::none},
      {8, 8, 1, 1, 1, 3, 1, 1, true, Activation::relu},       {4, 16, 2, 9, 11, {5, 3}, {2, 1}, 1, false, Activation::none},
      {8, 8, 2, 8, 9, 2, 0, 1, true, Activation::none},       {8, 8, 5, 64, 64, 3, 1, 1, false, Activation::none},
      {4, 4, 2, 6, 7, 2, 0, 1, false, Activation::none},  // 4 x 6 weight-gradient tiles, 16 taps: a tail of 4
  };
  Generator gen(34);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    const int64_t G = 2;
    const GroupedLayer l =
        random_grouped_layer(c.batch, G, c.per_group_in, c.per_group_out, c.h, c.w, c.kernel, c.bias, gen);
    const Conv2dGeometry g = conv2d_geometry(l.x.shape(), l.w.shape(), 1, c.pad, c.dilation, G);
    check_algorithms(g, c.act, c.per_group_out % 8 == 0 ? "padded grid" : "direct",
                     c.per_group_in % 8 == 0 ? "padded grid" : "direct", "padded grid");
    check_against_one_conv_per_group(l.x, l.w, l.b, 1, c.pad, c.dilation, G, c.act, gen);
  }
}

// An ungrouped stride-1 layer with 8 to 32 output channels takes the padded grid too (Note [Conv
// algorithms] in ops/cpu/conv.cpp): MNIST's two layers, a wider input and a 5 x 5 kernel, against
// the same convolution in f64 (im2col + GEMM), values and both gradients.
TEST_CASE("conv2d's padded-grid passes of ungrouped layers match f64 im2col + GEMM", "[conv][direct]") {
  struct Case {
    int64_t in, out, batch, hw, kernel, pad;
  };
  const Case cases[] = {{1, 16, 3, 28, 3, 1}, {16, 32, 2, 14, 3, 1}, {40, 8, 2, 9, 3, 0}, {3, 24, 2, 12, 5, 2}};
  Generator gen(77);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    const Tensor x0 = randn({c.batch, c.in, c.hw, c.hw}, {}, &gen);
    const Tensor w0 = randn({c.out, c.in, c.kernel, c.kernel}, {}, &gen);
    const Tensor b0 = randn({c.out}, {}, &gen);
    const Conv2dGeometry g = conv2d_geometry(x0.shape(), w0.shape(), 1, c.pad, 1, 1);
    if (!cpu::conv2d_direct_forward_suits(g, DType::f32, Activation::relu)) {
      WARN("this build's CPU path has no padded grid (it needs AVX-512); only the values are checked");
    } else {
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::forward)) == "padded grid");
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::input_grad)) ==
            (c.in % 8 == 0 && c.in <= 32 ? "padded grid" : "gemm+col2im"));
      // Its tasks are blocks of 8 output channels: with fewer than threads, im2col + GEMM.
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::weight_grad)) ==
            ((c.out + 7) / 8 >= num_threads() ? "padded grid" : "im2col+gemm"));
    }
    check_against_one_conv_per_group(x0, w0, b0, 1, c.pad, 1, 1, Activation::relu, gen);
  }
}

// Note [Weight gradient spans in L1] (ops/cpu/conv_grid_weight_grad_avx512.cpp): an ungrouped
// layer of 40 or 64 output channels (more than the forward takes on the grid) has its weight
// gradient on the grid, over planes whose rows span several spans of vectors (40 x 40) and over
// images several to a span (6 x 6), against f64 im2col + GEMM.
TEST_CASE("conv2d's padded-grid weight gradient takes ungrouped layers of up to 64 channels", "[conv][direct]") {
  Generator gen(78);
  const int before = num_threads();
  set_num_threads(2);  // at least a block of 8 channels per thread: the grid's rule for ungrouped layers
  // Batch 7: spans of several whole images (5 at 12 x 12, 21 at 6 x 6), the second starting past image 0.
  for (const auto& [out, hw] : {std::pair<int64_t, int64_t>{64, 40}, {40, 6}, {64, 12}}) {
    INFO(out << " channels, " << hw << " x " << hw);
    const Tensor x0 = randn({7, 8, hw, hw}, {}, &gen), w0 = randn({out, 8, 3, 3}, {}, &gen);
    const Tensor b0 = randn({out}, {}, &gen);
    const Conv2dGeometry g = conv2d_geometry(x0.shape(), w0.shape(), 1, 1, 1, 1);
    if (cpu::conv2d_grid_takes(DType::f32)) {
      CHECK(cpu::conv2d_grid_weight_grad_suits(g, DType::f32));
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::weight_grad)) == "padded grid");
    } else {
      WARN("this build's CPU path has no padded grid (it needs AVX-512); only the values are checked");
    }
    check_against_one_conv_per_group(x0, w0, b0, 1, 1, 1, 1, Activation::relu, gen);
  }
  set_num_threads(before);
}

// Note [Grid tasks]: with fewer than two (image, group) or group tasks per thread the grid kernels
// cut each into blocks of a multiple of 8 channels. One thread does not cut (batch 1); three
// threads cut the 2 groups of 32 or 24 channels, two and three threads the one group of 24
// (blocks of 16 and 8 at two threads); the values and both gradients must be the same bits. The
// last case's weight gradient sums 12 images in chunks of 5 (Note [Weight gradient on a padded
// grid]), whose size must not follow the blocks. Every case runs on the grid where the build has it.
TEST_CASE("conv2d's padded-grid passes give the same bits at 1, 2 and 3 threads", "[conv][direct]") {
  const int before = num_threads();
  struct Case {
    int64_t batch, in, out, groups, hw;
  };
  for (Case c : {Case{1, 32, 64, 2, 9}, Case{1, 32, 48, 2, 9}, Case{1, 32, 24, 1, 9}, Case{12, 16, 24, 1, 32}}) {
    INFO(c.out / c.groups << " output channels per group, " << c.groups << " groups, batch " << c.batch);
    Generator gen(55);
    const Tensor x = randn({c.batch, c.in, c.hw, c.hw + 2}, {}, &gen);
    const Tensor w = randn({c.out, c.in / c.groups, 3, 3}, {}, &gen), b = randn({c.out}, {}, &gen);
    const Tensor gy = randn({c.batch, c.out, c.hw, c.hw + 2}, {}, &gen);
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), 1, 1, 1, c.groups);
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const char* input_grad = cpu::conv2d_algorithm(g, cpu::ConvPass::input_grad);  // not this test's
      check_algorithms(g, Activation::relu, "padded grid", input_grad, "padded grid");
    }
    set_num_threads(before);
    std::vector<Tensor> results[3];
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor xv = x.detach().requires_grad_(), wv = w.detach().requires_grad_(), bv = b.detach().requires_grad_();
      const Tensor y = conv2d(xv, wv, bv, 1, 1, 1, c.groups, Activation::relu);
      sum(mul(y, gy)).backward();
      results[threads - 1] = {y, xv.grad(), wv.grad(), bv.grad()};  // db: Note [Channel stretches]
    }
    set_num_threads(before);
    for (int threads : {2, 3})
      for (size_t i = 0; i < 4; ++i) {
        INFO(threads << " threads, result " << i << " (y, dx, dw, db)");
        check_same_at_any_thread_count(results[0][i], results[threads - 1][i]);
      }
  }
}

// Note [Non-finite values on the grid] (ops/cpu/conv.cpp): an infinity in x (weight gradient) or
// in the weights (input gradient) sends the grid and row-kernel passes to im2col + GEMM, whose
// values f64 gives: NaN exactly where f64 has NaN, infinities where it has them, the rest close.
// The layer's grid passes would otherwise multiply the thrown-away columns and dy's padding by
// them (0 * inf = NaN where f64 is finite), in f32 and bf16.
TEST_CASE("conv2d's grid passes take im2col + GEMM's values when x or the weights are not finite",
          "[conv][nonfinite]") {
  Generator gen(19);
  const Tensor x0 = randn({2, 16, 10, 10}, {}, &gen), w0 = randn({16, 8, 3, 3}, {}, &gen);
  Tensor x_inf = x0.clone(), w_inf = w0.clone();
  x_inf.narrow(0, 1, 1).narrow(1, 3, 1).narrow(2, 4, 1).narrow(3, 9, 1).fill_(std::numeric_limits<double>::infinity());
  w_inf.narrow(0, 5, 1).narrow(1, 2, 1).narrow(2, 0, 1).narrow(3, 2, 1).fill_(std::numeric_limits<double>::infinity());
  auto check_like_f64 = [](const Tensor& got, const Tensor& want, double tol) {
    const std::vector<double> a = got.to(DType::f64).contiguous().to_vector<double>();
    const std::vector<double> b = want.contiguous().to_vector<double>();
    REQUIRE(a.size() == b.size());
    int64_t wrong = 0, nans = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      nans += std::isnan(b[i]);
      if (std::isnan(b[i]) || std::isinf(b[i]))
        wrong += !(std::isnan(a[i]) == std::isnan(b[i]) && (std::isnan(a[i]) || a[i] == b[i]));
      else wrong += !(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])));
    }
    CHECK(wrong == 0);
    return nans;
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    const double tol = dtype == DType::f32 ? 1e-4 : 1.0 / 64;
    const Tensor x = x_inf.to(dtype), w = w0.to(dtype);
    const Tensor dy = randn({2, 16, 8, 8}, {}, &gen).to(dtype);
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), 1, 0, 1, 2);
    if (cpu::conv2d_grid_takes(dtype)) CHECK(cpu::conv2d_grid_weight_grad_suits(g, dtype));
    const Tensor dw = conv2d_weight_grad(x, dy, w.shape(), 1, 0, 1, 2);
    const Tensor dw64 = conv2d_weight_grad(x.to(DType::f64), dy.to(DType::f64), w.shape(), 1, 0, 1, 2);
    const int64_t nans = check_like_f64(dw, dw64, tol);
    CHECK(nans < dw.numel());  // some weights never meet the infinity

    const Tensor wi = w_inf.to(dtype), dy1 = randn({2, 16, 10, 10}, {}, &gen).to(dtype);
    const Conv2dGeometry g1 = conv2d_geometry(x.shape(), wi.shape(), 1, 1, 1, 2);
    if (cpu::conv2d_grid_takes(dtype)) CHECK(cpu::conv2d_direct_input_grad_suits(g1, dtype));
    const Tensor dx = conv2d_input_grad(dy1, wi, x.shape(), 1, 1, 1, 2);
    check_like_f64(dx, conv2d_input_grad(dy1.to(DType::f64), wi.to(DType::f64), x.shape(), 1, 1, 1, 2), tol);
  }
}

TEST_CASE("conv2d's padded-grid weight gradient of an empty batch is zero", "[conv][direct]") {
  Tensor x = zeros({0, 16, 7, 7}).requires_grad_();
  Tensor w = randn({16, 8, 3, 3}).requires_grad_();
  const Tensor y = conv2d(x, w, {}, 1, 1, 1, 2);
  REQUIRE(y.shape() == Shape{0, 16, 7, 7});
  sum(y).backward();
  REQUIRE(w.grad().shape() == w.shape());
  CHECK(sum(abs(w.grad())).item() == 0.0);
}

// Note [Weight gradient over all images]: ungrouped layers whose weights outweigh an image's data
// gather every image's dy rows and columns and reduce over them in one GEMM per chunk of images.
// Against the sum of one-image weight gradients in f64 (one image never gathers), in f32 and in
// f64 (Eigen's GEMM), and the same f32 bits at 1, 2 and 3 threads: a 1x1 layer, a strided 1x1
// (SE-ResNeXt's downsampling), padded 3x3 layers at stride 1 (im2col's rows in registers) and
// stride 2 (its portable loop), and a batch of two chunks (16 MiB of gathered values each, the
// last of 2 images). Every case has M K > (M + K) L and is off the padded grid at 1 to 3 threads
// (20 output channels are no multiple of 8; the grid takes ungrouped layers at stride 1 only);
// and the same in bf16.
TEST_CASE("conv2d's weight gradient over all images matches one image at a time", "[conv]") {
  struct Case {
    int64_t batch, in, out, hw, kernel, stride, pad;
  };
  const int before = num_threads();
  for (Case c : {Case{6, 64, 96, 5, 1, 1, 0}, Case{5, 48, 64, 8, 1, 2, 0}, Case{3, 64, 20, 4, 3, 1, 1},
                 Case{3, 64, 64, 9, 3, 2, 1}, Case{130, 256, 256, 8, 1, 1, 0}}) {
    INFO("batch " << c.batch << ", " << c.in << " -> " << c.out << ", " << c.kernel << "x" << c.kernel << " stride "
                  << c.stride);
    Generator gen(91);
    const Tensor x = randn({c.batch, c.in, c.hw, c.hw}, {}, &gen);
    const Shape w_shape{c.out, c.in, c.kernel, c.kernel};
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w_shape, c.stride, c.pad, 1, 1);
    REQUIRE(g.out_channels * g.patch_size() > (g.out_channels + g.patch_size()) * g.out_plane());
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::weight_grad)) != "padded grid");
    }
    set_num_threads(before);
    const Tensor gy = randn({c.batch, c.out, g.out_h, g.out_w}, {}, &gen);
    Tensor want = zeros(w_shape, {.dtype = DType::f64});
    for (int64_t n = 0; n < c.batch; ++n)
      want = add(want, conv2d_weight_grad(x.narrow(0, n, 1).to(DType::f64), gy.narrow(0, n, 1).to(DType::f64),
                                          w_shape, c.stride, c.pad));
    check_close(conv2d_weight_grad(x.to(DType::f64), gy.to(DType::f64), w_shape, c.stride, c.pad), want, 1e-12,
                1e-10);
    std::vector<Tensor> dw;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      dw.push_back(conv2d_weight_grad(x, gy, w_shape, c.stride, c.pad));
    }
    set_num_threads(before);
    check_close(dw[0].to(DType::f64), want, 1e-4, 1e-3);
    for (size_t t : {1, 2}) CHECK(max(abs(sub(dw[0], dw[t]))).item() == 0.0);
    // bf16 gathers too, summing in f32 and rounding once: within the bf16 rounding of f64 on the
    // rounded inputs, the same bits at any thread count.
    const Tensor xb = x.to(DType::bf16), gyb = gy.to(DType::bf16);
    const Tensor want_bf16 = conv2d_weight_grad(xb.to(DType::f64), gyb.to(DType::f64), w_shape, c.stride, c.pad);
    std::vector<Tensor> dwb;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      dwb.push_back(conv2d_weight_grad(xb, gyb, w_shape, c.stride, c.pad));
    }
    set_num_threads(before);
    CHECK(dwb[0].dtype() == DType::bf16);
    check_close(dwb[0].to(DType::f64), want_bf16, 1.0 / 128, 1e-2);
    for (size_t t : {1, 2}) CHECK(max(abs(sub(dwb[0].to(DType::f32), dwb[t].to(DType::f32)))).item() == 0.0);
  }
}
