// The column workspace of the CUDA convolution (conv.cu), for tests that exercise its chunking.
//
//   cuda::set_conv2d_column_budget(2 * cuda::conv2d_column_elements(g) * sizeof(float));
//   // conv2d on cuda now builds the column matrices of two images at a time
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/conv_geometry.h"

namespace ember::cuda {

// Note [Conv column chunks] in conv.cu: elements of one image's column matrix (0 for a
// pointwise convolution, which needs none) and how many images one chunk holds.
int64_t conv2d_column_elements(const Conv2dGeometry& g);
int64_t conv2d_column_images(const Conv2dGeometry& g, size_t element_size);
// The column workspace budget in bytes (default 128 MiB).
void set_conv2d_column_budget(int64_t bytes);

}  // namespace ember::cuda
