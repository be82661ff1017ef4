// The geometry of 2-D sliding-window ops (convolution, pooling), shared by the op layer and
// every backend's kernels: plain structs, so the CPU and CUDA kernels take the same arguments.
//
//   IntPair stride = 2;             // (2, 2)
//   IntPair padding = {1, 0};       // (1 along H, 0 along W)
//   int64_t out = window_output_size(32, /*kernel=*/3, /*stride=*/2, /*pad=*/1, /*dilation=*/1);  // 16
#pragma once

#include <cstdint>

namespace ember {

// A (height, width) pair that an int converts to (the same value along both dims).
struct IntPair {
  int64_t h = 0, w = 0;
  constexpr IntPair(int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  constexpr IntPair(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

// floor((in + 2 pad - dilation (kernel - 1) - 1) / stride) + 1: PyTorch's output size. May be
// <= 0 when the window does not fit; callers check.
constexpr int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

// x (batch, in_channels, in_h, in_w) * w (out_channels, in_channels / groups, kernel_h, kernel_w)
//   -> y (batch, out_channels, out_h, out_w).
struct Conv2dGeometry {
  int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0;
  int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t out_h = 0, out_w = 0;

  int64_t in_channels_per_group() const { return in_channels / groups; }
  int64_t out_channels_per_group() const { return out_channels / groups; }
  // Rows of one group's column matrix: (in_channels / groups) * kernel_h * kernel_w.
  int64_t patch_size() const { return in_channels_per_group() * kernel_h * kernel_w; }
  int64_t out_plane() const { return out_h * out_w; }
  int64_t in_plane() const { return in_h * in_w; }
  // A 1x1, stride-1, unpadded convolution is a plain GEMM on the input (no im2col).
  bool is_pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0;
  }
};

// x (planes, in_h, in_w) pooled by a kernel_h x kernel_w window -> y (planes, out_h, out_w),
// where planes = batch * channels.
struct Pool2dGeometry {
  int64_t planes = 0, in_h = 0, in_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t out_h = 0, out_w = 0;
};

}  // namespace ember
