// 16-bit float storage types for the SIMT simulator, with the conversions of cuda_fp16.h and
// cuda_bf16.h that kernels use to load and store (arithmetic happens in float).
//
//   __nv_bfloat16 b = __float2bfloat16(x);    // round to nearest even
//   float y = __bfloat162float(b) * 2.0f;
#pragma once

#include <bit>
#include <cstdint>

namespace ember::sim {

// float -> IEEE binary16 bits, round to nearest even; overflow -> inf, NaN stays NaN.
constexpr uint16_t float_to_half_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (keep NaN quiet)
    return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                   // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return uint16_t(sign);            // below 2^-25: rounds to 0
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);  // 14..24 for exponents 112..102
    const uint32_t half_ulp = 1u << (shift - 1), rest = mant & ((1u << shift) - 1);
    uint32_t h = mant >> shift;
    if (rest > half_ulp || (rest == half_ulp && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // subnormal: mant * 2^-24
    const float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
constexpr uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

constexpr float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

}  // namespace ember::sim

// Same layout as CUDA's types (2 bytes); converts to and from float like the host side of
// cuda_fp16.hpp / cuda_bf16.hpp.
struct __half {
  uint16_t __x = 0;
  __half() = default;
  __half(float f) : __x(ember::sim::float_to_half_bits(f)) {}
  operator float() const { return ember::sim::half_bits_to_float(__x); }
};

struct __nv_bfloat16 {
  uint16_t __x = 0;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(ember::sim::float_to_bfloat16_bits(f)) {}
  operator float() const { return ember::sim::bfloat16_bits_to_float(__x); }
};

using half = __half;
using nv_bfloat16 = __nv_bfloat16;

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
// The bits as they are (no conversion), as cuda_fp16.h / cuda_bf16.h define them.
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short bits) {
  __half h;
  h.__x = bits;
  return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  __nv_bfloat16 b;
  b.__x = bits;
  return b;
}
