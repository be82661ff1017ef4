// The 16-bit floating storage types of DType::bf16 and DType::f16, and their conversions.
// Arithmetic happens in float: an element converts to float when read and rounds once when
// written, as in PyTorch (Note [Reduced-precision arithmetic]).
//
//   BFloat16 b = 1.0f / 3.0f;                 // round to nearest even: 0.333984375
//   float y = float(b) * 2.0f;                // widening is exact
//   using C = compute_t<BFloat16>;            // float: the type kernels compute in
//
// Note [Reduced-precision arithmetic]: bf16 keeps f32's 8-bit exponent with 8 significant bits;
// f16 has a 5-bit exponent (largest finite 65504, subnormals below 2^-14) with 11 significant
// bits. Kernels never compute in these types: they load into compute_t<T> (float), compute, and
// round the result once, so an elementwise op equals PyTorch's bit for bit and a reduction
// accumulates in f32. The conversions below are PyTorch's (c10/util/BFloat16.h, Half.h):
// round to nearest even; NaN stays a quiet NaN of the same sign; f16 overflows to Inf from
// 65520 up and rounds into subnormals below 2^-14. A double converts through float first, as
// c10's constructors take a float.
//
// The functions are constexpr and EMBER_HOST_DEVICE, so CPU loops, the SIMT simulator and nvcc
// device code share them; the simulator's __half / __nv_bfloat16 (cuda/sim/half.h) use them too.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/host_device.h"

namespace ember {

// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
EMBER_HOST_DEVICE constexpr uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

EMBER_HOST_DEVICE constexpr float bfloat16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

// float -> IEEE binary16 bits, round to nearest even; overflow -> Inf, NaN stays NaN.
//
// Note [Branch-free f16 rounding]: every case is computed and one is selected, so the CPU loops
// that store f16 vectorise (with branches, converting 6.4M floats took 20.2 ms against 0.55 to
// bf16; half_bits_to_float below likewise, for the loops that read f16). Normal results rebias
// the exponent 127 -> 15 and round at bit 13 by adding 0xfff plus the bit kept there (ties to
// even); a carry runs into the exponent, up to Inf's 0x7c00 from 65520. Results below 2^-14 (f16
// subnormals and 0) come from one float add: 0.5 + |f| has a spacing of 2^-24, f16's smallest
// subnormal, so the add rounds |f| to a multiple of it, to nearest even, and that multiple is left
// in the low bits (values just below 2^-14 that round up give 0x400, the smallest normal). The
// same results as the branching forms for all 2^32 floats and 2^16 halves (checked when these
// replaced them).
EMBER_HOST_DEVICE constexpr uint16_t float_to_half_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  const uint32_t normal = (abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1u)) >> 13;
  const uint32_t below_normal = abs < 0x38800000u ? abs : 0x38800000u;  // no NaN to add (constexpr)
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(below_normal) + 0.5f) - 0x3f000000u;
  const uint32_t finite = abs < 0x38800000u ? subnormal : normal;       // below 2^-14
  const uint32_t inf_or_nan = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;   // a NaN stays quiet
  return uint16_t(sign | (abs >= 0x47800000u ? inf_or_nan : finite));  // 65536 and up: Inf
}

// IEEE binary16 bits -> float, exact; without branches too (Note [Branch-free f16 rounding]).
EMBER_HOST_DEVICE constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  const uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  const uint32_t inf_or_nan = 0x7f800000u | (mant << 13);
  const uint32_t subnormal = std::bit_cast<uint32_t>(float(mant) * (1.0f / 16777216.0f));  // mant 2^-24
  return std::bit_cast<float>(sign | (exp == 0 ? subnormal : exp == 0x1fu ? inf_or_nan : normal));
}

namespace detail {

// One storage type per format; `Format` supplies the two conversions.
template <class Format>
struct Float16 {
  uint16_t bits;  // no initialiser: trivially constructible, so usable in __shared__ arrays

  Float16() = default;
  EMBER_HOST_DEVICE constexpr Float16(float f) : bits(Format::from_float(f)) {}
  // Integers and double convert through float (c10's semantics).
  template <class U>
    requires(std::is_arithmetic_v<U> && !std::is_same_v<U, float>)
  EMBER_HOST_DEVICE constexpr explicit Float16(U v) : Float16(static_cast<float>(v)) {}
  EMBER_HOST_DEVICE constexpr operator float() const { return Format::to_float(bits); }

  // In float, rounded once (c10's operators): what an accumulating kernel (index_add) needs.
  EMBER_HOST_DEVICE constexpr Float16& operator+=(float v) { return *this = Float16(float(*this) + v); }
  EMBER_HOST_DEVICE constexpr Float16& operator-=(float v) { return *this = Float16(float(*this) - v); }
  EMBER_HOST_DEVICE constexpr Float16& operator*=(float v) { return *this = Float16(float(*this) * v); }
  EMBER_HOST_DEVICE constexpr Float16& operator/=(float v) { return *this = Float16(float(*this) / v); }

  EMBER_HOST_DEVICE static constexpr Float16 from_bits(uint16_t b) {
    Float16 x;
    x.bits = b;
    return x;
  }
};

struct BFloat16Format {
  EMBER_HOST_DEVICE static constexpr uint16_t from_float(float f) { return float_to_bfloat16_bits(f); }
  EMBER_HOST_DEVICE static constexpr float to_float(uint16_t b) { return bfloat16_bits_to_float(b); }
};
struct HalfFormat {
  EMBER_HOST_DEVICE static constexpr uint16_t from_float(float f) { return float_to_half_bits(f); }
  EMBER_HOST_DEVICE static constexpr float to_float(uint16_t b) { return half_bits_to_float(b); }
};

}  // namespace detail

using BFloat16 = detail::Float16<detail::BFloat16Format>;  // DType::bf16
using Half = detail::Float16<detail::HalfFormat>;          // DType::f16

template <class T>
inline constexpr bool is_float16_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

// The type a kernel computes in for elements of type T: float for the 16-bit formats, T itself
// otherwise.
template <class T>
using compute_t = std::conditional_t<is_float16_v<T>, float, T>;

}  // namespace ember
