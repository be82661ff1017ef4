// What test_conv_grid_bf16.cpp and test_conv_grid_f16.cpp share: the layers whose 16-bit passes
// they hold to the f32 ones, and the check of the padded grid's row copies from f32 into a 16-bit
// type (ops/cpu/conv_grid_tiles_avx512.h) against the scalar rounding:
//
//   for (const GridCase& c : kGridCases) ...
//   check_grid_rounding<BFloat16>({0x3F808000u, ...}, 12345, float_to_bfloat16_bits);
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "ops/activation_rules.h"
#include "ops/conv.h"
#include "support/test_support.h"
#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

namespace ember::test {

// MNIST's two layers (ungrouped; 8 and 16 output channels per thread-block), grouped layers of 8,
// 16 and 24 channels, a thin group of 2 and a depthwise layer, padding 0 and 2, dilation 2, with
// and without bias and ReLU; strided grouped layers (Note [Strided grid], the input gradient as
// phase forwards) of 2, 4 and 8 channels per group, odd sizes, stride 2 and (2, 1); and groups of
// 4 at stride 1, which f32 gives to the row kernel and bf16 to the grid.
struct GridCase {
  int64_t in, out, groups, batch, h, w, kernel, pad, dilation;
  bool bias;
  Activation act;
  IntPair stride = 1;
};
inline const GridCase kGridCases[] = {
    {1, 16, 1, 3, 28, 28, 3, 1, 1, true, Activation::relu},   {16, 32, 1, 2, 14, 14, 3, 1, 1, true, Activation::relu},
    {16, 16, 2, 2, 7, 9, 3, 1, 1, false, Activation::none},   {32, 32, 2, 1, 10, 10, 3, 0, 1, true, Activation::none},
    {16, 48, 2, 2, 9, 11, 3, 2, 2, true, Activation::relu},   {8, 4, 4, 2, 12, 12, 3, 1, 1, false, Activation::none},
    {8, 8, 8, 2, 13, 6, 3, 1, 1, true, Activation::relu},
    {16, 16, 8, 2, 15, 16, 3, 1, 1, false, Activation::none, 2},
    {32, 32, 8, 2, 16, 13, 3, 1, 1, true, Activation::relu, 2},
    {64, 64, 8, 1, 9, 9, 3, 1, 1, false, Activation::none, 2},
    {32, 32, 8, 2, 10, 12, 3, 1, 1, false, Activation::none, {2, 1}},
    {16, 16, 4, 2, 14, 14, 3, 1, 1, true, Activation::relu},
    {32, 32, 8, 1, 9, 17, 3, 1, 1, false, Activation::none},
};

#if defined(__AVX512F__)
// The given float bit patterns (the special cases), then random ones up to 64 whole vectors and a
// tail of 9, rounded by the grid's row copy: each as reference(value), nothing past the row.
template <class T, class Reference>
void check_grid_rounding(std::vector<uint32_t> bits, uint64_t seed, Reference reference) {
  while (bits.size() < 16 * 64 + 9) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    bits.push_back(uint32_t(seed >> 32));
  }
  std::vector<float> values;
  for (uint32_t b : bits) values.push_back(std::bit_cast<float>(b));
  const int64_t width = int64_t(values.size());
  std::vector<T> rounded(values.size() + 1, T::from_bits(0xABCD));
  cpu::grid_detail::copy_rows(values.data(), 0, rounded.data(), 0, 1, width);
  for (int64_t j = 0; j < width; ++j) {
    INFO("bits 0x" << std::hex << bits[size_t(j)]);
    CHECK(rounded[size_t(j)].bits == reference(values[size_t(j)]));
  }
  CHECK(rounded.back().bits == 0xABCD);
}
#endif

}  // namespace ember::test
