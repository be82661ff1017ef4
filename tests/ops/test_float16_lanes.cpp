// The AVX-512 16-bit conversions of ops/cpu/float16_blocks.h (the roundings bfloat16_lanes and
// half_lanes, the widening widen_half_lanes) against core/float16.h's scalar conversions, which
// the rest of ember converts with: every lane must have the scalar's bits, for a sweep over the
// float bit patterns and the values where the formats differ most (ties, the edge of overflow,
// subnormal results, NaNs with payloads, -0), and for every half.
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

#include "core/float16.h"
#include "support/test_support.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include "ops/cpu/float16_blocks.h"
#endif

using namespace ember;

namespace {

std::vector<float> values_to_round() {
  std::vector<float> v;
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 65521) v.push_back(std::bit_cast<float>(uint32_t(bits)));
  const float specials[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 65535.0f, 1e30f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                            std::ldexp(1.5f, -25), std::ldexp(3.0f, -26), std::ldexp(1.5f, -24), std::ldexp(2.5f, -24),
                            -std::ldexp(1.5f, -24), 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11),
                            1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8),
                            std::bit_cast<float>(0x7FC00000u), std::bit_cast<float>(0xFFC00001u),
                            std::bit_cast<float>(0x7F800001u), std::bit_cast<float>(0x7FBFFFFFu),
                            std::bit_cast<float>(0xFFFFE000u), std::numeric_limits<float>::denorm_min()};
  v.insert(v.end(), std::begin(specials), std::end(specials));
  while (v.size() % 16) v.push_back(0.0f);
  return v;
}

}  // namespace

TEST_CASE("bfloat16_lanes and half_lanes round every lane as core/float16.h does", "[bf16][f16]") {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  const std::vector<float> v = values_to_round();
  int bf16_mismatches = 0, half_mismatches = 0;
  for (size_t i = 0; i < v.size(); i += 16) {
    const __m512 lanes = _mm512_loadu_ps(v.data() + i);
    alignas(64) uint32_t bf16[16], half[16];
    _mm512_store_si512(bf16, cpu::bfloat16_lanes(lanes));
    _mm512_store_si512(half, cpu::half_lanes(lanes));
    for (size_t j = 0; j < 16; ++j) {
      const float x = v[i + j];
      if (bf16[j] != float_to_bfloat16_bits(x) && ++bf16_mismatches <= 5)
        FAIL_CHECK("bf16 of " << std::bit_cast<uint32_t>(x) << ": " << bf16[j] << " vs " << float_to_bfloat16_bits(x));
      if (half[j] != float_to_half_bits(x) && ++half_mismatches <= 5)
        FAIL_CHECK("f16 of " << std::bit_cast<uint32_t>(x) << ": " << half[j] << " vs " << float_to_half_bits(x));
    }
  }
  CHECK(bf16_mismatches == 0);
  CHECK(half_mismatches == 0);
#else
  EMBER_SKIP("an AVX-512 build only");
#endif
}

TEST_CASE("widen_half_lanes gives every half the float of core/float16.h, signalling NaNs included", "[f16]") {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  int mismatches = 0;
  for (uint32_t h0 = 0; h0 < 65536; h0 += 16) {
    alignas(32) uint16_t halves[16];
    for (uint32_t j = 0; j < 16; ++j) halves[j] = uint16_t(h0 + j);
    alignas(64) uint32_t got[16];
    _mm512_store_si512(got, _mm512_castps_si512(cpu::widen_half_lanes(_mm256_load_si256(
                                reinterpret_cast<const __m256i*>(halves)))));
    for (uint32_t j = 0; j < 16; ++j) {
      const uint32_t want = std::bit_cast<uint32_t>(half_bits_to_float(halves[j]));
      if (got[j] != want && ++mismatches <= 5) FAIL_CHECK("half " << halves[j] << ": " << got[j] << " vs " << want);
    }
  }
  CHECK(mismatches == 0);
#else
  EMBER_SKIP("an AVX-512 build only");
#endif
}
