#include "apps/bench/bench_kernels_seresnext.h"

#include "apps/bench/device_timing.h"
#include "apps/bench/onednn_peer.h"
#include "core/parallel.h"
#include "ember.h"
#include "ops/kernels.h"

namespace ember {
namespace {

// One convolution of the network: (n, cin, hw, hw) -> cout channels, k x k kernel.
struct ConvLayer {
  int64_t n, cin, cout, groups, hw, k, stride, pad;
};

// SE-ResNeXt-50 (32x4d): the grouped 3x3 convolution of each stage (32 groups of 4, 8, 16 and 32
// channels), the 1x1 convolutions of the first and third stage's blocks, the 7x7/2 stem and the
// stride-2 grouped 3x3 of the second stage's first block; then the small member's grouped 3x3
// layers at its training batch (32 groups of 1, and of 2 and 4 at stride 2; Note [Thin groups on
// the grid] in ops/cpu/conv_grid_avx512.cpp). The same list, in the same order, is in
// torch_kernels_seresnext.py.
constexpr ConvLayer kLayers[] = {
    {8, 128, 128, 32, 56, 3, 1, 1},   {8, 256, 256, 32, 28, 3, 1, 1}, {8, 512, 512, 32, 14, 3, 1, 1},
    {8, 1024, 1024, 32, 7, 3, 1, 1},  {8, 256, 128, 1, 56, 1, 1, 0},  {8, 1024, 512, 1, 14, 1, 1, 0},
    {8, 3, 64, 1, 224, 7, 2, 3},      {8, 256, 256, 32, 56, 3, 2, 1}, {64, 32, 32, 32, 32, 3, 1, 1},
    {64, 64, 64, 32, 32, 3, 2, 1},    {64, 128, 128, 32, 16, 3, 2, 1},
};

// "n8_c128to128_g32_56x56_k3s1p1"
std::string layer_name(const ConvLayer& l) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return std::string("n") + s(l.n) + "_c" + s(l.cin) + "to" + s(l.cout) + "_g" + s(l.groups) + "_" + s(l.hw) + "x" +
         s(l.hw) + "_k" + s(l.k) + "s" + s(l.stride) + "p" + s(l.pad);
}

}  // namespace

std::vector<bench::KernelRow> bench_kernels_seresnext(Device device) {
  autograd::NoGradGuard no_grad;
  std::vector<bench::KernelRow> rows;
  const bench::TimingOptions timing = bench::timing_for(device);
  auto randn = [&](const Shape& shape) { return ember::randn(shape).to(device); };
  for (const ConvLayer& l : kLayers) {
    const Tensor x = randn({l.n, l.cin, l.hw, l.hw}), w = randn({l.cout, l.cin / l.groups, l.k, l.k});
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), l.stride, l.pad, 1, l.groups);
    const Tensor dy = randn({l.n, l.cout, g.out_h, g.out_w});
    auto add = [&](const char* pass, cpu::ConvPass which, const std::function<void()>& fn) {
      rows.push_back({std::string("conv2d_") + pass + "_" + layer_name(l), bench::median_ms(fn, timing),
                      device.is_cpu() ? cpu::conv2d_algorithm(g, which) : "cuda"});
      if (!device.is_cpu()) return;
      const bench::onednn::ConvTiming peer =
          bench::onednn::conv_pass_timing(g, which, DType::f32, num_threads(), timing);
      rows.back().onednn_ms = peer.ms, rows.back().onednn_implementation = peer.implementation;
    };
    add("forward", cpu::ConvPass::forward, [&] { conv2d(x, w, {}, l.stride, l.pad, 1, l.groups); });
    add("input_grad", cpu::ConvPass::input_grad,
        [&] { conv2d_input_grad(dy, w, x.shape(), l.stride, l.pad, 1, l.groups); });
    add("weight_grad", cpu::ConvPass::weight_grad,
        [&] { conv2d_weight_grad(x, dy, w.shape(), l.stride, l.pad, 1, l.groups); });
  }
  // The SE tail at the first and third stage's block outputs (Note [SE tail] in ops/scale_add_relu.h).
  for (const Shape& shape : {Shape{8, 256, 56, 56}, Shape{8, 1024, 14, 14}}) {
    const Tensor x = randn(shape), r = randn(shape), s = randn({shape[0], shape[1]}), dy = randn(shape);
    const Tensor y = scale_add_relu(x, s, r);
    const std::string dims = std::string("n") + std::to_string(shape[0]) + "_c" + std::to_string(shape[1]) + "_" +
                             std::to_string(shape[2]) + "x" + std::to_string(shape[3]);
    rows.push_back({"scale_add_relu_forward_" + dims, bench::median_ms([&] { scale_add_relu(x, s, r); }, timing),
                    "fused"});
    rows.push_back({"scale_add_relu_backward_" + dims,
                    bench::median_ms([&] { scale_add_relu_backward(dy, y, x, s, true, true, true); }, timing),
                    "fused"});
  }
  return rows;
}

}  // namespace ember
