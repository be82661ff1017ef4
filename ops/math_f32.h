// exp, tanh, log and log1p of a float in branch-free arithmetic, so that the host compiler
// vectorises the loops that call them (libm's functions are calls, which keep a loop scalar: Note
// [Vectorisable exp] in ops/cpu/vec_math.h). The elementwise functors use them for f32 and for the
// f32 compute type of bf16 and f16 on the host (CPU loops and the SIMT simulator); nvcc's device
// code keeps CUDA's own.
//
//   float y = fn::exp_f32(x);     // within 1.02 ulp of exp(x) for every float x
//   float t = fn::tanh_f32(x);    // within 1.34 ulp of tanh(x)
//   float l = fn::log_f32(x);     // within 0.83 ulp of log(x); log1p_f32 within 2.5 ulp
//
// (Measured against double precision over all 2^32 floats (log and log1p: every third), compiled
// as the library is, with FMA contraction: worst exp 1.0104 ulp at -5.8778844, tanh 1.3303 at
// 0.62830955, log 0.823, log1p 2.469; 1 / (1 + exp_f32(-x)) is within 2.5 ulp of the sigmoid
// wherever that is a normal float.)
//
// Note [Exp by parts]: exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln 2 / 2
// (r computed in two steps, ln 2 = hi + lo, hi with 9 significant bits so that n * hi is exact);
// exp(r) is Cephes' degree-6 polynomial. exp_f32 covers the whole float range: 2^n is applied as
// two factors 2^(n >> 1) and 2^(n - (n >> 1)), both normal floats for every n in [-150, 128], so
// the first product is exact and the second rounds once, also into the subnormals and to +inf;
// inputs are clamped to [-104, 89] first (beyond, the result is 0 or +inf anyway) so that n fits,
// and a NaN takes -104 there (converting a NaN to int is undefined) before it is returned.
// fast_exp in ops/cpu/vec_math.h applies 2^n as one factor and flushes what would be subnormal,
// which its softmax-like callers cannot notice and which saves a multiply.
//
// Note [tanh by range]: below |x| = 0.625 tanh is Cephes' odd polynomial x + x^3 P(x^2) (the
// identity below cancels there); above, tanh |x| = 1 - 2 / (exp(2|x|) + 1), which only loses the
// bits of a result that is at least 0.55. The sign is put back last, so tanh(-0) = -0; NaN stays
// NaN through exp_f32.
//
// Note [log by exponent and mantissa]: x = 2^e m with m in [sqrt(1/2), sqrt(2)) from the float's
// bits (subnormal x scaled by 2^23 first), log(x) = e ln 2 + log1p(m - 1), m - 1 exact, and
// log1p of it by Cephes' logf polynomial; ln 2 in two parts as for exp. 0, negative x, +inf and
// NaN are selected at the end. log1p_f32(x) is log_f32(u) x / (u - 1) for u = 1 + x, where the
// ratio undoes the rounding of 1 + x (Goldberg's form); x itself where u is 1.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ember::fn {

// exp(x) = p * 2^n for x in the clamped range (Note [Exp by parts]).
struct ExpParts {
  float p;
  int32_t n;
};

inline ExpParts exp_parts(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return {p, int32_t(n)};
}

// 2^n for n in [-126, 127], built in the exponent bits.
inline float exp2_int(int32_t n) { return std::bit_cast<float>((n + 127) << 23); }

inline float exp_f32(float x) {
  const float lo = x >= -104.0f ? x : -104.0f;  // NaN too (Note [Exp by parts])
  const float clamped = lo > 89.0f ? 89.0f : lo;
  const ExpParts e = exp_parts(clamped);
  const int32_t half = e.n >> 1;
  const float out = (e.p * exp2_int(half)) * exp2_int(e.n - half);
  return x != x ? x : out;  // NaN stays NaN
}

inline float tanh_f32(float x) {
  const float a = std::fabs(x);
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = a + a * z * p;
  const float large = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);
  return std::copysign(a < 0.625f ? small : large, x);
}

inline float log_f32(float x) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const bool subnormal = x < std::numeric_limits<float>::min();  // below the smallest normal
  const uint32_t bits = std::bit_cast<uint32_t>(subnormal ? x * 8388608.0f : x);  // 2^23
  const bool low = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u) < 0.707106781186547524f;
  // m in [0.5, 1) from the bits, doubled below sqrt(1/2) (its exponent one less), minus 1.
  const float m = std::bit_cast<float>((bits & 0x007fffffu) | (low ? 0x3f800000u : 0x3f000000u)) - 1.0f;
  const float e = float(int32_t(bits >> 23) - (low ? 127 : 126) - (subnormal ? 23 : 0));
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  const float y = (p * m * z + -2.12194440e-4f * e) + -0.5f * z;
  const float finite = (m + y) + 0.693359375f * e;
  const float special = x == 0.0f ? -kInf : x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : x;
  return x > 0.0f && x < kInf ? finite : special;  // NaN and +inf are themselves
}

inline float log1p_f32(float x) {
  const float u = 1.0f + x, d = u - 1.0f;
  const float ratio = log_f32(u) * (x / (d == 0.0f ? 1.0f : d));
  return d == 0.0f ? x : u == std::numeric_limits<float>::infinity() ? u : ratio;
}

}  // namespace ember::fn
