// The scalar rules of the metric-learning losses (pytorch-metric-learning 2.8.1's formulas),
// shared by the CPU kernels (ops/cpu/<loss>.cpp) and the CUDA kernels (ops/cuda/<loss>.cu) so
// both backends compute the same thing, in double.
//
//   OnlineLogSumExp lse;                 // log sum exp over a stream of values, one pass
//   for (double x : xs) lse.add(x);
//   double v = lse.value();              // -inf for an empty stream
//
// Pair conventions (every pair loss): embeddings are L2-normalised rows e_i, s_ij = e_i . e_j;
// (i, j) is a positive pair when i != j and labels match, a negative pair when labels differ.
#pragma once

#include <cfloat>
#include <cmath>

#include "core/host_device.h"

namespace ember {

// Note [Online softmax]: max and sum of exp(x - max) in one pass; a larger value rescales the
// sum so far by exp(old max - new max). -inf adds nothing; NaN poisons the result.
struct OnlineLogSumExp {
  double max = -INFINITY, sum = 0;
  EMBER_HOST_DEVICE void add(double x) {
    if (x > max) {
      sum = sum * std::exp(max - x) + 1;
      max = x;
    } else if (x == x && x != -INFINITY) {
      sum += std::exp(x - max);
    } else if (x != x) {
      max = x;  // NaN
    }
  }
  EMBER_HOST_DEVICE void merge(const OnlineLogSumExp& o) {
    if (o.max != o.max || max != max) {
      max = o.max != o.max ? o.max : max;
      return;
    }
    if (o.max == -INFINITY) return;
    if (max == -INFINITY) {
      *this = o;
      return;
    }
    const double m = max > o.max ? max : o.max;
    sum = sum * std::exp(max - m) + o.sum * std::exp(o.max - m);
    max = m;
  }
  EMBER_HOST_DEVICE double value() const { return max == -INFINITY ? -INFINITY : max + std::log(sum); }
};

// The smallest normal value of the embeddings' dtype: PML's c_f.small_val(dtype).
template <class T>
EMBER_HOST_DEVICE double small_val() {
  return sizeof(T) == sizeof(float) ? double(FLT_MIN) : DBL_MIN;
}

// ---- NT-Xent ---------------------------------------------------------------------------------
// One positive pair (i, j) with z = s_ij / t - lse_i, lse_i = log sum over the negatives k of i
// of exp(s_ik / t) (-inf when i has none): PML's loss is -log(softmax + small_val) with
// softmax = exp(s_ij/t) / (exp(s_ij/t) + sum_k exp(s_ik/t)) = sigmoid(z).
struct NTXentPair {
  double loss;  // -log(sigmoid(z) + small)
  double dz;    // d loss / d z
};
EMBER_HOST_DEVICE NTXentPair ntxent_pair(double z, double small) {
  // sigmoid(z) and 1 - sigmoid(z) without cancellation for either sign of z.
  const double e = std::exp(-std::fabs(z));
  const double q = z >= 0 ? 1 / (1 + e) : e / (1 + e);
  const double one_minus_q = z >= 0 ? e / (1 + e) : 1 / (1 + e);
  return {-std::log(q + small), -q * one_minus_q / (q + small)};
}

// d loss / d s_ij through anchor i's terms, to be scaled by 1 / (t P): a positive pair's dz, or
// a negative pair's share of anchor i's lse, -exp(s_ij / t - lse_i) G_i. i != j.
EMBER_HOST_DEVICE double ntxent_weight(bool positive, double s_over_t, double lse_i, double G_i, double small) {
  return positive ? ntxent_pair(s_over_t - lse_i, small).dz : -std::exp(s_over_t - lse_i) * G_i;
}

}  // namespace ember
