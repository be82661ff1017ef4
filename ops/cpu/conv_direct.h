// The direct input gradient on the CPU for grouped layers with few channels per group
// (SE-ResNeXt's 32 x 4, depthwise): no column matrix, loops vectorised along output rows. Used by
// ops/cpu/conv.cpp, which chooses it by shape (Note [Conv algorithms] there).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "ops/conv_geometry.h"

namespace ember::cpu {

// The outputs o in [0, count) whose input position o * stride + offset lies in [0, size).
struct Range {
  int64_t begin, end;
};
inline Range valid_outputs(int64_t offset, int64_t stride, int64_t size, int64_t count) {
  const int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t end = offset >= size ? 0 : std::min(count, (size - offset + stride - 1) / stride);
  return {std::min(begin, count), std::max(std::min(begin, count), end)};
}

// Whether the direct kernels below are the better algorithm for g (Note [Conv algorithms]).
bool conv2d_direct_suits(const Conv2dGeometry& g);

// The contract of conv2d_input_grad (ops/kernels.h).
template <class T>
void conv2d_direct_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);

}  // namespace ember::cpu
