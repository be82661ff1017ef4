#include "apps/bench/bench_kernels_conv.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "ember.h"

namespace ember {
namespace {

constexpr int kBlocks = 7;              // timed blocks; the median is reported
constexpr double kBlockSeconds = 0.05;  // calls per block are chosen to take about this long

double seconds_of(const std::function<void()>& fn, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Median milliseconds per call: one warm-up call (which also fills the allocator's cache)
// sizes the blocks.
double median_ms(const std::function<void()>& fn) {
  const double warm = seconds_of(fn, 1);
  const int calls = std::max(1, int(kBlockSeconds / std::max(warm, 1e-7)));
  std::vector<double> per_call;
  for (int b = 0; b < kBlocks; ++b) per_call.push_back(seconds_of(fn, calls) / calls * 1e3);
  std::nth_element(per_call.begin(), per_call.begin() + kBlocks / 2, per_call.end());
  return per_call[kBlocks / 2];
}

// One 3x3, padding-1 convolution shape and its three timed passes.
struct ConvShape {
  int64_t n, cin, cout, hw;
};

}  // namespace

std::vector<bench::KernelRow> bench_kernels_conv() {
  autograd::NoGradGuard no_grad;
  std::vector<bench::KernelRow> rows;
  auto add = [&](std::string name, const std::function<void()>& fn) { rows.push_back({std::move(name), median_ms(fn)}); };

  {
    const ConvShape s{2, 4, 8, 64};
    Tensor x = randn({s.n, s.cin, s.hw, s.hw}), w = randn({s.cout, s.cin, 3, 3}), b = randn({s.cout});
    Tensor dy = randn({s.n, s.cout, s.hw, s.hw});
    add("conv2d_forward_n2_c4to8_64x64_k3p1", [&] { conv2d(x, w, b, 1, 1); });
    add("conv2d_input_grad_n2_c4to8_64x64_k3p1", [&] { conv2d_input_grad(dy, w, x.shape(), 1, 1); });
  }
  for (const ConvShape& s : {ConvShape{2, 4, 8, 32}, ConvShape{8, 32, 64, 128}}) {
    Tensor x = randn({s.n, s.cin, s.hw, s.hw}), dy = randn({s.n, s.cout, s.hw, s.hw});
    const Shape w_shape{s.cout, s.cin, 3, 3};
    add("conv2d_weight_grad_n" + std::to_string(s.n) + "_c" + std::to_string(s.cin) + "to" + std::to_string(s.cout) +
            "_" + std::to_string(s.hw) + "x" + std::to_string(s.hw) + "_k3p1",
        [&] { conv2d_weight_grad(x, dy, w_shape, 1, 1); });
  }
  {
    Tensor dy = randn({32, 128, 64, 64});
    add("conv2d_bias_grad_n32_c128_64x64", [&] { conv2d_bias_grad(dy); });
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
