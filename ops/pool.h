// 2-D pooling over the last two dims of (N, C, H, W) or (C, H, W) tensors, as in
// torch.nn.functional (floor mode: windows that would start past the padded input are dropped).
//
//   Tensor y = max_pool2d(x, /*kernel=*/2);                      // stride defaults to the kernel
//   auto [values, indices] = max_pool2d_with_indices(x, 3, 2, 1);
//   Tensor a = avg_pool2d(x, 3, 1, 1, /*count_include_pad=*/false);
//   Tensor g = adaptive_avg_pool2d(x, 1);                        // global average pooling
//
// kernel, stride and padding are (h, w) pairs; an int means the same along both dims. Padding
// may be at most half the kernel. The backward passes are ops of their own.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "ops/conv_geometry.h"
#include "ops/reduce.h"

namespace ember {

// A max pool's window, for the ops and modules that pass one around (conv2d_max_pool2d in
// ops/conv_pool.h, MaxPool2d).
struct MaxPoolArgs {
  IntPair kernel = 2;
  std::optional<IntPair> stride = {};  // the kernel's
  IntPair padding = 0;
};

// values: the window maxima; indices (i64): the flat index h * W + w of each maximum within its
// input plane (what max_pool2d_backward scatters by). NaN wins over numbers, as in PyTorch.
ValuesIndices max_pool2d_with_indices(const Tensor& x, IntPair kernel, std::optional<IntPair> stride = {},
                                      IntPair padding = 0);
// The values alone; for its backward it keeps, on the CPU, each maximum's offset in its window
// (one byte, for windows of at most 256 cells) instead of an i64 index (Note [Max pool window
// offsets] in ops/cpu/pool.cpp).
Tensor max_pool2d(const Tensor& x, IntPair kernel, std::optional<IntPair> stride = {}, IntPair padding = 0);
// dL/dx (input_shape) from dy and the indices of max_pool2d_with_indices.
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Shape& input_shape, IntPair kernel,
                           std::optional<IntPair> stride = {}, IntPair padding = 0);

// For ops that pool their own output inside one autograd node (conv2d_max_pool2d, ops/conv_pool.h):
// the forward, not recorded, with each maximum's position in the form max_pool2d keeps for its
// backward (a one-byte window offset on the CPU where the window has at most 256 cells, else the
// i64 index above), and the backward from such positions.
ValuesIndices max_pool2d_with_positions(const Tensor& x, IntPair kernel, std::optional<IntPair> stride = {},
                                        IntPair padding = 0);
Tensor max_pool2d_backward_from_positions(const Tensor& dy, const Tensor& positions, const Shape& input_shape,
                                          IntPair kernel, std::optional<IntPair> stride = {}, IntPair padding = 0);

// Window means; with count_include_pad the padding cells count in the divisor.
Tensor avg_pool2d(const Tensor& x, IntPair kernel, std::optional<IntPair> stride = {}, IntPair padding = 0,
                  bool count_include_pad = true);
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& input_shape, IntPair kernel,
                           std::optional<IntPair> stride = {}, IntPair padding = 0, bool count_include_pad = true);

// Means over PyTorch's adaptive windows, sized so the output is output_size (any size >= 1;
// 1 is global average pooling).
Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& dy, const Shape& input_shape);

// The geometry a pooling op uses; invalid arguments are an Error naming `op`.
Pool2dGeometry pool2d_geometry(const Shape& x_shape, IntPair kernel, std::optional<IntPair> stride, IntPair padding,
                               const char* op);

}  // namespace ember
