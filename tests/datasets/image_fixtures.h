// Small images for the image tests: tensors from listed values, PNG files in temp folders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::test {

// A u8 (H, W, C) image holding `values` row-major.
Tensor u8_image(int64_t height, int64_t width, int64_t channels, const std::vector<uint8_t>& values);
// A u8 (H, W, 3) image whose pixel (y, x) is (seed + 3y + 5x, 2y + x, 255 - seed - x) mod 256.
Tensor patterned_image(int64_t height, int64_t width, int seed = 0);
// `image` as float values (row-major), for comparisons.
std::vector<float> values_of(const Tensor& image);
// Writes `bytes` to `path`.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace ember::test
