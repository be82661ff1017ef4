// 16-bit float storage types for the SIMT simulator, with the conversions of cuda_fp16.h and
// cuda_bf16.h that kernels use to load and store (arithmetic happens in float).
//
//   __nv_bfloat16 b = __float2bfloat16(x);    // round to nearest even
//   float y = __bfloat162float(b) * 2.0f;
#pragma once

#include <cstdint>

#include "core/float16.h"

namespace ember::sim {

// The conversions live in core/float16.h, shared with ember's BFloat16 / Half tensors.
using ember::bfloat16_bits_to_float;
using ember::float_to_bfloat16_bits;
using ember::float_to_half_bits;
using ember::half_bits_to_float;

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
