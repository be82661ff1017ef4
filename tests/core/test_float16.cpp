// BFloat16 and Half (core/float16.h): round to nearest even from f32, exact widening, the
// special values as PyTorch handles them; f16 against the CPU's own F16C conversion.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/dtype.h"
#include "core/float16.h"

using namespace ember;

namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// An independent reference for bf16: of the two bf16 values around finite f (truncation and
// the next one up in magnitude), the nearer in exact (double) arithmetic; a tie goes to the
// even one. Values that round past the largest finite bf16 become Inf, as IEEE rounding does.
uint16_t bf16_reference(float f) {
  const uint32_t u = bits_of(f) & 0x7fffffffu;
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  const double d = double(from_bits(u)), dl = double(from_bits(uint32_t(lo) << 16));
  // Above the largest finite bf16 the next value up is 2^128, as if the exponent went on.
  const double dh = hi == 0x7f80 ? 0x1p128 : double(from_bits(uint32_t(hi) << 16));
  if (d - dl < dh - d) return lo;
  if (d - dl > dh - d) return hi;
  return (lo & 1u) ? hi : lo;
}

}  // namespace

TEST_CASE("float16: bf16 rounds to nearest even and widens exactly") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(1.0f / 3.0f).bits == 0x3eab);                       // 0x3eaaaaab rounds up
  CHECK(float(BFloat16(1.0f / 3.0f)) == 0.333984375f);
  CHECK(BFloat16(1.0f + 0x1p-8f).bits == 0x3f80);                    // tie: to the even 1.0
  CHECK(BFloat16(1.0f + 3 * 0x1p-8f).bits == 0x3f82);                // tie: to the even 1 + 2^-6
  CHECK(BFloat16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3f81);         // just above the tie: up
  CHECK(BFloat16(-0.0f).bits == 0x8000);
  CHECK(BFloat16(std::numeric_limits<float>::infinity()).bits == 0x7f80);
  CHECK(BFloat16(-std::numeric_limits<float>::infinity()).bits == 0xff80);
  CHECK(BFloat16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds past the largest bf16
  CHECK(BFloat16(from_bits(0x7f7f7fffu)).bits == 0x7f7f);             // just below the tie: stays finite
  const BFloat16 nan(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(float(nan)));
  CHECK(std::isnan(float(BFloat16(from_bits(0xff800001u)))));         // a signalling NaN whose payload
  CHECK(BFloat16(from_bits(0xff800001u)).bits == 0xffc0);             // would truncate to -Inf stays NaN
  CHECK(BFloat16(from_bits(0x00000001u)).bits == 0x0000);             // the smallest subnormal: to 0
  CHECK(BFloat16(from_bits(0x00008000u)).bits == 0x0000);             // tie: to the even 0
  CHECK(BFloat16(from_bits(0x00018000u)).bits == 0x0002);             // tie: to the even 2

  // A double converts through float (c10's constructor takes a float): 1 + 2^-8 + 2^-40 is
  // 1 + 2^-8 in float, a tie that rounds to 1, not to the 1 + 2^-7 a direct rounding would give.
  CHECK(BFloat16(1.0 + 0x1p-8 + 0x1p-40).bits == 0x3f80);
  CHECK(BFloat16(int64_t(257)).bits == BFloat16(257.0f).bits);
}

TEST_CASE("float16: bf16 agrees with an exact reference on millions of floats and round-trips every value") {
  std::mt19937 rng(7);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint32_t u = rng();
    const float f = from_bits(u);
    if (!std::isfinite(f)) continue;
    const uint16_t ref = uint16_t(bf16_reference(f) | (u >> 16 & 0x8000u));
    if (BFloat16(f).bits != ref) FAIL("bf16(" << f << " = 0x" << std::hex << u << ") = 0x" << BFloat16(f).bits
                                                << ", expected 0x" << ref);
  }
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = float(BFloat16::from_bits(uint16_t(b)));
    CHECK(bits_of(f) == b << 16);  // widening places the bits, nothing else
    if (!std::isnan(f) && BFloat16(f).bits != b) FAIL("bf16 round trip of 0x" << std::hex << b);
  }
}

TEST_CASE("float16: f16 handles overflow, subnormals and ties as IEEE binary16") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(65504.0f).bits == 0x7bff);
  CHECK(Half(65519.99f).bits == 0x7bff);  // below the halfway point to 65536
  CHECK(Half(65520.0f).bits == 0x7c00);   // the tie rounds to even, which is Inf
  CHECK(Half(-1e9f).bits == 0xfc00);
  CHECK(Half(0x1p-24f).bits == 0x0001);   // the smallest subnormal
  CHECK(Half(0x1p-25f).bits == 0x0000);   // tie between 0 and 2^-24: the even 0
  CHECK(Half(0x1.000002p-25f).bits == 0x0001);
  CHECK(Half(3 * 0x1p-25f).bits == 0x0002);  // tie between 1 and 2 (x 2^-24): the even 2
  CHECK(Half(0x1p-14f).bits == 0x0400);   // the smallest normal
  CHECK(float(Half::from_bits(0x03ff)) == 1023 * 0x1p-24f);
  CHECK(std::isnan(float(Half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(Half(-std::numeric_limits<float>::quiet_NaN()).bits == 0xfe00);  // the sign survives
  // Constant expressions too (Note [Branch-free f16 rounding]: no arithmetic on a NaN, which
  // Clang refuses to evaluate at compile time).
  static_assert(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7e00);
  static_assert(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
  static_assert(float_to_half_bits(0x1.8p-24f) == 0x0002);
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = float(Half::from_bits(uint16_t(b)));
    if (std::isnan(f)) continue;
    if (Half(f).bits != b) FAIL("f16 round trip of 0x" << std::hex << b);
  }
}

#if defined(__x86_64__)
namespace {
// The tests are built without -march=native: the F16C instructions are enabled per function and
// used only where the CPU reports them.
__attribute__((target("f16c"))) float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t f16c_round(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
}  // namespace

TEST_CASE("float16: f16 conversions equal this CPU's F16C instructions") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("this CPU has no F16C: nothing to compare with");
    return;
  }
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float hw = f16c_widen(uint16_t(b));
    const float sw = float(Half::from_bits(uint16_t(b)));
    if (std::isnan(hw)) CHECK(std::isnan(sw));
    else if (bits_of(hw) != bits_of(sw)) FAIL("widen 0x" << std::hex << b);
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 4'000'000; ++i) {
    // Half the draws near f16's range (exponents 100..150), where every rounding path lives.
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 51u) << 23);
    const float f = from_bits(u);
    const uint16_t hw = f16c_round(f);
    const uint16_t sw = Half(f).bits;
    if (std::isnan(f)) CHECK((sw & 0x7c00u) == 0x7c00u);
    else if (hw != sw) FAIL("f16(0x" << std::hex << u << ") = 0x" << sw << ", F16C gives 0x" << hw);
  }
}
#endif

TEST_CASE("float16: dtype plumbing") {
  STATIC_REQUIRE(sizeof(BFloat16) == 2);
  STATIC_REQUIRE(sizeof(Half) == 2);
  STATIC_REQUIRE(std::is_trivially_default_constructible_v<BFloat16>);  // usable in __shared__ arrays
  STATIC_REQUIRE(dtype_of<BFloat16>() == DType::bf16);
  STATIC_REQUIRE(dtype_of<Half>() == DType::f16);
  STATIC_REQUIRE(std::is_same_v<compute_t<BFloat16>, float>);
  STATIC_REQUIRE(std::is_same_v<compute_t<double>, double>);
  CHECK(is_reduced_float(DType::bf16));
  CHECK(!is_reduced_float(DType::f32));
  CHECK(dispatch_all(DType::f16, "test", []<class T>(TypeTag<T>) { return dtype_of<T>(); }) == DType::f16);
  CHECK(dispatch_arithmetic(DType::bf16, "test", []<class T>(TypeTag<T>) { return dtype_of<T>(); }) == DType::bf16);
  // Arithmetic happens in float; compound assignment rounds once.
  BFloat16 acc(1.0f);
  acc += 0x1p-9f;  // below half an ulp of 1: lost
  CHECK(acc.bits == 0x3f80);
  acc *= 3.0f;
  CHECK(float(acc) == 3.0f);
}
