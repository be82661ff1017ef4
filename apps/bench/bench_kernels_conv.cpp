#include "apps/bench/bench_kernels_conv.h"

#include <optional>

#include "apps/bench/device_timing.h"
#include "apps/bench/onednn_peer.h"
#include "core/parallel.h"
#include "ember.h"

namespace ember {
namespace {

using bench::TimingOptions;

// One 3x3, padding-1 convolution shape and its three timed passes.
struct ConvShape {
  int64_t n, cin, cout, hw;
};

}  // namespace

std::vector<bench::KernelRow> bench_kernels_conv(Device device) {
  autograd::NoGradGuard no_grad;
  std::vector<bench::KernelRow> rows;
  const TimingOptions timing = bench::timing_for(device);
  // A row, and where it is a CPU convolution pass, the algorithm ember chose and oneDNN's time for
  // the same pass right after.
  struct Pass {
    const Tensor& x;
    const Shape& w_shape;
    cpu::ConvPass which;
  };
  auto add = [&](std::string name, const std::function<void()>& fn, std::optional<Pass> pass = {}) {
    rows.push_back({std::move(name), bench::median_ms(fn, timing)});
    if (!pass || !device.is_cpu()) return;
    const Conv2dGeometry g = conv2d_geometry(pass->x.shape(), pass->w_shape, 1, 1, 1, 1);
    rows.back().algorithm = cpu::conv2d_algorithm(g, pass->which, pass->x.dtype());
    const bench::onednn::ConvTiming peer =
        bench::onednn::conv_pass_timing(g, pass->which, pass->x.dtype(), num_threads(), timing);
    rows.back().onednn_ms = peer.ms, rows.back().onednn_implementation = peer.implementation;
  };
  auto randn = [&](const Shape& shape) { return ember::randn(shape).to(device); };

  {
    const ConvShape s{2, 4, 8, 64};
    Tensor x = randn({s.n, s.cin, s.hw, s.hw}), w = randn({s.cout, s.cin, 3, 3}), b = randn({s.cout});
    Tensor dy = randn({s.n, s.cout, s.hw, s.hw});
    add("conv2d_forward_n2_c4to8_64x64_k3p1", [&] { conv2d(x, w, b, 1, 1); },
        Pass{x, w.shape(), cpu::ConvPass::forward});
    add("conv2d_input_grad_n2_c4to8_64x64_k3p1", [&] { conv2d_input_grad(dy, w, x.shape(), 1, 1); },
        Pass{x, w.shape(), cpu::ConvPass::input_grad});
    // Bias + ReLU fused into the forward's GEMM epilogue (ops/activation.h); PyTorch: relu after conv2d.
    add("conv2d_relu_forward_n2_c4to8_64x64_k3p1", [&] { conv2d(x, w, b, 1, 1, 1, 1, Activation::relu); });
  }
  for (const ConvShape& s : {ConvShape{2, 4, 8, 32}, ConvShape{8, 32, 64, 128}}) {
    Tensor x = randn({s.n, s.cin, s.hw, s.hw}), dy = randn({s.n, s.cout, s.hw, s.hw});
    const Shape w_shape{s.cout, s.cin, 3, 3};
    add("conv2d_weight_grad_n" + std::to_string(s.n) + "_c" + std::to_string(s.cin) + "to" + std::to_string(s.cout) +
            "_" + std::to_string(s.hw) + "x" + std::to_string(s.hw) + "_k3p1",
        [&] { conv2d_weight_grad(x, dy, w_shape, 1, 1); }, Pass{x, w_shape, cpu::ConvPass::weight_grad});
  }
  // f32 beside bf16 (Note [Native bf16 GEMM ops] in ops/cpu/gemm_typed.h): mnist_cnn's second
  // convolution at batch 64, and a wider layer. PyTorch's rows are its f32 and bf16 kernels.
  for (const ConvShape& s : {ConvShape{64, 16, 32, 14}, ConvShape{8, 32, 64, 128}}) {
    const std::string shape = "_n" + std::to_string(s.n) + "_c" + std::to_string(s.cin) + "to" +
                              std::to_string(s.cout) + "_" + std::to_string(s.hw) + "x" + std::to_string(s.hw) +
                              "_k3p1_";
    for (DType dtype : {DType::f32, DType::bf16}) {
      const std::string suffix = shape + (dtype == DType::f32 ? "f32" : "bf16");
      Tensor x = randn({s.n, s.cin, s.hw, s.hw}).to(dtype), w = randn({s.cout, s.cin, 3, 3}).to(dtype);
      Tensor b = randn({s.cout}).to(dtype), dy = randn({s.n, s.cout, s.hw, s.hw}).to(dtype);
      add("conv2d_relu_forward" + suffix, [&] { conv2d(x, w, b, 1, 1, 1, 1, Activation::relu); });
      add("conv2d_input_grad" + suffix, [&] { conv2d_input_grad(dy, w, x.shape(), 1, 1); },
          Pass{x, w.shape(), cpu::ConvPass::input_grad});
      add("conv2d_weight_grad" + suffix, [&] { conv2d_weight_grad(x, dy, w.shape(), 1, 1); },
          Pass{x, w.shape(), cpu::ConvPass::weight_grad});
    }
  }
  {
    Tensor dy = randn({32, 128, 64, 64});
    add("conv2d_bias_grad_n32_c128_64x64", [&] { conv2d_bias_grad(dy); });
    // The fused backward of bias + ReLU: one pass masks dy and sums the bias gradient
    // (PyTorch: threshold_backward, then the sum).
    Tensor y = relu(randn(dy.shape()));
    add("bias_relu_backward_n32_c128_64x64", [&] { bias_activation_backward(dy, y, Activation::relu, 1, true); });
  }
  {
    Tensor x = randn({8, 64, 128, 128});
    auto [y, indices] = max_pool2d_with_indices(x, 2);
    Tensor dy = randn(y.shape());
    add("max_pool2d_forward_8x64x128x128_k2", [&] { max_pool2d_with_indices(x, 2); });
    add("max_pool2d_backward_8x64x128x128_k2", [&] { max_pool2d_backward(dy, indices, x.shape(), 2); });
  }
  return rows;
}

}  // namespace ember
