// exp for the softmax-family kernels, written so the compiler can vectorise loops that call it.
//
//   for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i] - max);   // becomes AVX-512 code
//
// Note [Vectorisable exp]: std::exp(float) is a libm call, which stops GCC from vectorising the
// loop around it unless -ffast-math is on (it is not: ember keeps IEEE semantics). For f32 this
// is Cephes' expf instead: exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln 2 / 2,
// exp(r) by a degree-6 polynomial, 2^n built in the exponent bits; all branch-free arithmetic.
// Its error is within 2 ulp over the normal range. Results that would be subnormal
// (x < -87.3) flush to 0, which no softmax or log-sum-exp can notice next to a term of 1.
// f64 (used by gradcheck) keeps std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ember::cpu {

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo
  constexpr float kMin = -87.3365447f, kMax = 88.3762626f;
  const float xc = std::fmin(std::fmax(x, kMin), kMax);
  const float n = std::floor(xc * kLog2e + 0.5f);
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float scaled = p * std::bit_cast<float>((int32_t(n) + 127) << 23);
  const float big = x > kMax ? std::numeric_limits<float>::infinity() : scaled;
  const float out = x < kMin ? 0.0f : big;
  return x != x ? x : out;  // NaN stays NaN
}

inline double fast_exp(double x) { return std::exp(x); }

}  // namespace ember::cpu
