// exp, row reductions and relu's backward mask for the CPU kernels, written so that the compiler
// can vectorise the loops that use them.
//
//   for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i] - max);   // becomes AVX-512 code
//   double s = lane_sum(n, [&](int64_t i) { return y[i]; });
//
// Note [Vectorisable exp]: std::exp(float) is a libm call, which stops GCC from vectorising the
// loop around it unless -ffast-math is on (it is not: ember keeps IEEE semantics); so do
// std::floor and std::fmin, hence ternary clamps here and a rounding trick in ops/math_f32.h. For
// f32 this is Cephes' expf instead, all branch-free arithmetic (Note [Exp by parts] there),
// within 1.02 ulp over the normal range. Results that would be subnormal (x < -87.3) flush to 0,
// which no softmax or log-sum-exp can notice next to a term of 1 (fn::exp_f32 keeps them).
// f64 (used by gradcheck) keeps std::exp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/math_f32.h"

namespace ember::cpu {

inline float fast_exp(float x) {
  constexpr float kMin = -87.3365447f, kMax = 88.3762626f;
  const float lo = x >= kMin ? x : kMin;  // NaN takes kMin: no float -> int conversion of a NaN
  const fn::ExpParts e = fn::exp_parts(lo > kMax ? kMax : lo);
  const float scaled = e.p * fn::exp2_int(e.n);
  const float big = x > kMax ? std::numeric_limits<float>::infinity() : scaled;
  const float out = x < kMin ? 0.0f : big;
  return x != x ? x : out;  // NaN stays NaN
}

inline double fast_exp(double x) { return std::exp(x); }

// Note [Lane reductions]: without -ffast-math a loop `s += v[i]` must add in order, so it
// cannot be vectorised. These keep kAccLanes independent partial results (lane k takes
// elements k, k + kAccLanes, ...) that the compiler maps onto vector registers, and combine
// them at the end, pairwise (a chain of 16 dependent adds would cost more than the vector loop
// over a 64-wide tile row). Sums accumulate in double.
constexpr int64_t kAccLanes = 16;

// op over the kAccLanes partial results and `rest`, pairwise: a tree of depth 4, written out so
// that it leaves the vectorisation of the loop before it alone (a loop here made GCC give up on
// some lane loops).
template <class T, class Op>
T combine_lanes(const T (&part)[kAccLanes], T rest, Op op) {
  static_assert(kAccLanes == 16);
  const T q0 = op(op(part[0], part[8]), op(part[4], part[12])), q1 = op(op(part[1], part[9]), op(part[5], part[13]));
  const T q2 = op(op(part[2], part[10]), op(part[6], part[14])), q3 = op(op(part[3], part[11]), op(part[7], part[15]));
  return op(rest, op(op(q0, q2), op(q1, q3)));
}

// max over f(0..n-1) of type T (-inf when n = 0; NaNs are skipped, a NaN input still poisons
// anything computed from it afterwards).
//
// Note [Lane max as a loop]: GCC 12 unrolls a 16-lane loop completely before its vectorisers
// run, and if-converts each lane's select into a scalar cmov on memory, which the SLP vectoriser
// then leaves alone: the loop ran one float at a time (6.7% of an ArcFace step in a profile).
// Kept a loop (`unroll 1`), the loop vectoriser turns the select into vmaxps, whose NaN rule is
// the select's (a NaN v keeps the lane). A GCC vector type instead was built lane by lane from
// scalar loads.
template <class T, class F>
T lane_max(int64_t n, F f) {
  constexpr T kLow = -std::numeric_limits<T>::infinity();
  T part[kAccLanes];
  for (int64_t k = 0; k < kAccLanes; ++k) part[k] = kLow;
  int64_t i = 0;
  for (; i + kAccLanes <= n; i += kAccLanes) {
#pragma GCC unroll 1
    for (int64_t k = 0; k < kAccLanes; ++k) {
      const T v = f(i + k);
      part[k] = v > part[k] ? v : part[k];
    }
  }
  T m = kLow;
  for (; i < n; ++i) {
    const T v = f(i);
    m = v > m ? v : m;
  }
  return combine_lanes(part, m, [](T a, T b) { return b > a ? b : a; });
}

// sum over f(0..n-1), accumulated in double.
template <class F>
double lane_sum(int64_t n, F f) {
  double part[kAccLanes] = {};
  int64_t i = 0;
  for (; i + kAccLanes <= n; i += kAccLanes)
    for (int64_t k = 0; k < kAccLanes; ++k) part[k] += double(f(i + k));
  double s = 0;
  for (; i < n; ++i) s += double(f(i));
  return combine_lanes(part, s, [](double a, double b) { return a + b; });
}

// a b + c with one rounding where the build has FMA instructions (std::fma, which GCC
// vectorises), and as a b + c without them, where there is nothing to contract: either way every
// caller rounds alike, which -ffp-contract's choices per instantiation do not promise (Note [GCC
// contraction] in ops/cpu/scale_add_relu.cpp). std::fma without FMA instructions is a libm call.
template <class T>
T multiply_add(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// relu's backward, g where y > 0 or y is NaN (BinaryOp::relu_backward, Note [NaN through relu]),
// else +0, as a bit mask rather than a select. Note [GCC 12 masked-load miscompile]: GCC 12.2
// at -O3 with Ice Lake or later tuning (what -march=native picks on such CPUs) sinks the load of
// g into the select, turns it into masked loads, and in a group of lanes then gave every vector
// the first vector's mask, so the other vectors kept stale values where the masks differed (SE
// tail's dscale-only backward was off by up to 30% on a 2 x 3 x 4 x 5 test). Elsewhere the
// select kept the loop scalar. An AND with a mask needs g in every lane: plain loads, vectorised.
template <class T>
T relu_backward_masked(T g, T y) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(T) == sizeof(Bits));
  const Bits keep = Bits(0) - Bits(!(y <= T(0)));
  return std::bit_cast<T>(std::bit_cast<Bits>(g) & keep);
}

// keep ? a : b as bit masks, for a vectorised loop whose select has a load in an arm, e.g.
// lane_sum(n, [&](int64_t k) { return select_bits(y[k] == c, s[k], 0.0f); }). Written as the
// select, GCC 12 made it masked loads and summed the wrong lanes (Note [GCC 12 masked-load
// miscompile]; a scratch check of that sum at 26 to 1,000 values was wrong for most classes).
template <class T>
T select_bits(bool keep, T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(T) == sizeof(Bits));
  const Bits mask = Bits(0) - Bits(keep);
  return std::bit_cast<T>((std::bit_cast<Bits>(a) & mask) | (std::bit_cast<Bits>(b) & ~mask));
}

}  // namespace ember::cpu
