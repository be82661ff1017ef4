// The simulator's 16-bit float conversions (cuda/sim/half.h): round to nearest even, the
// edges of each format.
#include <cmath>
#include <limits>

#include "cuda/platform.h"
#include "support/test_support.h"

namespace {
uint16_t half_bits(float f) { return __float2half(f).__x; }
uint16_t bf16_bits(float f) { return __float2bfloat16(f).__x; }
}  // namespace

TEST_CASE("float -> half rounds to nearest even and handles the edges") {
  REQUIRE(half_bits(1.0f) == 0x3c00);
  REQUIRE(half_bits(-2.0f) == 0xc000);
  REQUIRE(half_bits(65504.0f) == 0x7bff);                    // largest half
  REQUIRE(half_bits(65519.0f) == 0x7bff);                    // still rounds down
  REQUIRE(half_bits(65520.0f) == 0x7c00);                    // ties to even: inf
  REQUIRE(half_bits(std::ldexp(1.0f, -24)) == 0x0001);       // smallest subnormal
  REQUIRE(half_bits(std::ldexp(1.0f, -25)) == 0x0000);       // tie to even: zero
  REQUIRE(half_bits(std::ldexp(1.5f, -25)) == 0x0001);
  REQUIRE(half_bits(std::ldexp(1.0f, -14)) == 0x0400);       // smallest normal
  REQUIRE(half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie: stays even
  REQUIRE(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie: rounds up to even
  REQUIRE(half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  REQUIRE(std::isnan(__half2float(__float2half(std::nanf("")))));
}

TEST_CASE("half -> float is exact, including subnormals") {
  for (float f : {0.0f, -0.0f, 1.0f, 0.5f, -3.25f, 65504.0f, std::ldexp(1.0f, -24), std::ldexp(3.0f, -20)})
    REQUIRE(__half2float(__float2half(f)) == f);
}

TEST_CASE("float -> bfloat16 rounds to nearest even") {
  REQUIRE(bf16_bits(1.0f) == 0x3f80);
  REQUIRE(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);       // tie: stays even
  REQUIRE(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);   // tie: up to even
  REQUIRE(bf16_bits(1.0f + std::ldexp(1.0f, -7)) == 0x3f81);       // exact
  REQUIRE(__bfloat162float(__float2bfloat16(-2.5f)) == -2.5f);
  REQUIRE(std::isnan(__bfloat162float(__float2bfloat16(std::nanf("")))));
  REQUIRE(bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
}
