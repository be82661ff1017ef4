// Pairs of 16-bit floats (__half2, __nv_bfloat162) for the SIMT simulator, and the arithmetic
// intrinsics of cuda_fp16.h / cuda_bf16.h that kernels use on them and on single values: each
// computes in float and rounds the result once, as the GPU's instruction does (atomicAdd on a
// pair rounds each half once, as sm_80's does).
//
//   __half2 p = __floats2half2_rn(a, b);
//   float2 s = __half22float2(__hmul2(p, q));
#pragma once

#include "cuda/sim/atomics.h"  // atomic_update, for atomicAdd on pairs
#include "cuda/sim/builtins.h"
#include "cuda/sim/half.h"

struct alignas(4) __half2 {
  __half x, y;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
using half2 = __half2;
using nv_bfloat162 = __nv_bfloat162;

// Note [one set of intrinsics]: the two types share every operation; a macro writes them once
// with CUDA's names for each (H: the scalar, H2: the pair, the name parts of each family).
#define EMBER_SIM_PAIR_OPS(H, H2, floats2pair, float2pair, pair2floats, halves2pair)                          \
  inline H2 floats2pair(float a, float b) { return {H(a), H(b)}; }                                          \
  inline H2 float2pair(float a) { return {H(a), H(a)}; }                                                    \
  inline H2 halves2pair(H a, H b) { return {a, b}; }                                                        \
  inline float2 pair2floats(H2 v) { return {float(v.x), float(v.y)}; }                                      \
  inline float __low2float(H2 v) { return float(v.x); }                                                     \
  inline float __high2float(H2 v) { return float(v.y); }                                                    \
  inline H __low2half(H2 v) { return v.x; }                                                                 \
  inline H __high2half(H2 v) { return v.y; }                                                                \
  inline H __hadd(H a, H b) { return H(float(a) + float(b)); }                                              \
  inline H __hsub(H a, H b) { return H(float(a) - float(b)); }                                              \
  inline H __hmul(H a, H b) { return H(float(a) * float(b)); }                                              \
  inline H __hdiv(H a, H b) { return H(float(a) / float(b)); }                                              \
  inline H __hfma(H a, H b, H c) { return H(std::fma(float(a), float(b), float(c))); }                      \
  inline H __hneg(H a) { return H(-float(a)); }                                                             \
  inline H __habs(H a) { return H(std::fabs(float(a))); }                                                   \
  inline H __hmax(H a, H b) { return float(a) < float(b) ? b : a; }                                         \
  inline H __hmin(H a, H b) { return float(b) < float(a) ? b : a; }                                         \
  inline bool __hlt(H a, H b) { return float(a) < float(b); }                                               \
  inline bool __hgt(H a, H b) { return float(a) > float(b); }                                               \
  inline bool __heq(H a, H b) { return float(a) == float(b); }                                              \
  inline H2 __hadd2(H2 a, H2 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }                            \
  inline H2 __hsub2(H2 a, H2 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }                            \
  inline H2 __hmul2(H2 a, H2 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }                            \
  inline H2 __h2div(H2 a, H2 b) { return {__hdiv(a.x, b.x), __hdiv(a.y, b.y)}; }                            \
  inline H2 __hfma2(H2 a, H2 b, H2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }            \
  inline H2 __hneg2(H2 a) { return {__hneg(a.x), __hneg(a.y)}; }                                            \
  inline H2 __hmax2(H2 a, H2 b) { return {__hmax(a.x, b.x), __hmax(a.y, b.y)}; }                            \
  inline H2 __hmin2(H2 a, H2 b) { return {__hmin(a.x, b.x), __hmin(a.y, b.y)}; }                            \
  inline H2 operator+(H2 a, H2 b) { return __hadd2(a, b); }                                                 \
  inline H2 operator-(H2 a, H2 b) { return __hsub2(a, b); }                                                 \
  inline H2 operator*(H2 a, H2 b) { return __hmul2(a, b); }                                                 \
  inline H2 operator/(H2 a, H2 b) { return __h2div(a, b); }                                                 \
  inline H2& operator+=(H2& a, H2 b) { return a = __hadd2(a, b); }                                          \
  inline H2& operator*=(H2& a, H2 b) { return a = __hmul2(a, b); }                                          \
  inline H atomicAdd(H* address, H v) { return ember::sim::atomic_update(address, [v](H o) { return __hadd(o, v); }); } \
  inline H2 atomicAdd(H2* address, H2 v) {                                                                  \
    return ember::sim::atomic_update(address, [v](H2 o) { return __hadd2(o, v); });                          \
  }

EMBER_SIM_PAIR_OPS(__half, __half2, __floats2half2_rn, __float2half2_rn, __half22float2, __halves2half2)
EMBER_SIM_PAIR_OPS(__nv_bfloat16, __nv_bfloat162, __floats2bfloat162_rn, __float2bfloat162_rn, __bfloat1622float2,
                   __halves2bfloat162)
#undef EMBER_SIM_PAIR_OPS

inline __half2 make_half2(__half x, __half y) { return {x, y}; }
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) { return {x, y}; }
