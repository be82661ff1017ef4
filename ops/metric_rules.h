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
#include <cstdint>

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
    if (o.max == max) {  // a common shift (Note [Bounded log-sum-exp] in ops/cpu/similarity_tiles.h)
      sum += o.sum;
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

// ---- Multi-Similarity -------------------------------------------------------------------------
// Row i's two log-sums, PML's lmu.logsumexp with add_one=True (the 1 is exp(0), a value every
// stream starts with, so a row without positives or negatives gets log 1 = 0 for that part):
//   lp_i = log(1 + sum over the positives j of i of exp(alpha (base - s_ij)))
//   ln_i = log(1 + sum over the negatives k of i of exp(beta (s_ik - base)))
// loss_i = lp_i / alpha + ln_i / beta (distance.margin of cosine similarity: base - s for a
// positive, s - base for a negative).
struct MultiSimilarityParams {
  double alpha, beta, base;
};
EMBER_HOST_DEVICE double ms_exponent(bool positive, double s, const MultiSimilarityParams& p) {
  return positive ? p.alpha * (p.base - s) : p.beta * (s - p.base);
}
EMBER_HOST_DEVICE double ms_row_loss(double lp_i, double ln_i, const MultiSimilarityParams& p) {
  return lp_i / p.alpha + ln_i / p.beta;
}
// d loss_i / d s_ij (i != j), given lp_i, ln_i: -exp(alpha (base - s) - lp_i) for a positive
// pair, exp(beta (s - base) - ln_i) for a negative pair.
EMBER_HOST_DEVICE double ms_weight(bool positive, double s, double lp_i, double ln_i, const MultiSimilarityParams& p) {
  return positive ? -std::exp(ms_exponent(true, s, p) - lp_i) : std::exp(ms_exponent(false, s, p) - ln_i);
}

// ---- ArcFace -----------------------------------------------------------------------------------
// Rows are L2-normalised embeddings e_i and class weights w_c (PML's W columns); c_ic = e_i . w_c.
// The target class y_i's cosine becomes PML's modified cosine (margin m in radians; theta =
// acos(clamp(c, -1, 1))): cos(theta + m) while theta <= pi - m, else cos(theta) - m sin(m).
// The logits are scale * (modified or plain cosines); the loss is their mean cross-entropy.
constexpr double kArcFacePi = 3.14159265358979323846;  // np.deg2rad(180)

struct ArcFaceTarget {
  double logit;   // the modified cosine (unscaled)
  double dlogit;  // d logit / d c, PyTorch's chain rule: 0 where the clamp is active
};
EMBER_HOST_DEVICE ArcFaceTarget arcface_target(double cosine, double margin) {
  const double c = cosine < -1 ? -1.0 : (cosine > 1 ? 1.0 : cosine);
  const double theta = std::acos(c);
  // d theta / d c = -1 / sqrt(1 - c^2) inside [-1, 1] (infinite at the ends, as in PyTorch).
  const double dtheta = cosine >= -1 && cosine <= 1 ? -1 / std::sqrt(1 - c * c) : 0.0;
  if (theta <= kArcFacePi - margin) {
    const double dl = -std::sin(theta + margin);
    return {std::cos(theta + margin), dtheta == 0 ? 0.0 : dl * dtheta};
  }
  const double dl = -std::sin(theta);
  return {std::cos(theta) - margin * std::sin(margin), dtheta == 0 ? 0.0 : dl * dtheta};
}

// The logit of class c for a row whose label is `target` or not: scale * (modified) cosine.
EMBER_HOST_DEVICE double arcface_logit(bool target, double cosine, double margin, double scale) {
  return scale * (target ? arcface_target(cosine, margin).logit : cosine);
}

// d (lse_i - x_iy) / d c_ic, row i's cross-entropy through class c, lse_i = log sum_c exp(x_ic).
EMBER_HOST_DEVICE double arcface_weight(bool target, double cosine, double margin, double scale, double lse) {
  if (!target) return scale * std::exp(scale * cosine - lse);
  const ArcFaceTarget t = arcface_target(cosine, margin);
  return scale * (std::exp(scale * t.logit - lse) - 1) * t.dlogit;
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

// ---- SupCon -----------------------------------------------------------------------------------
// Anchor i with P_i positives: lse_i = log sum over every j != i of exp(s_ij / t) (PML's
// denominator over the positive and the negative mask; its max-subtraction cancels), and
// S_i = sum over its positives of s_ij / t. PML's loss_i = -(sum over the positives of
// log_prob_ij) / (P_i + small_val) = (P_i lse_i - S_i) / (P_i + small); 0 without positives.
EMBER_HOST_DEVICE double supcon_anchor_loss(double P_i, double lse_i, double S_i, double small) {
  return P_i > 0 ? (P_i * lse_i - S_i) / (P_i + small) : 0.0;
}
// t * d loss_i / d s_ij (i != j) for an anchor AvgNonZeroReducer keeps (loss_i > 0), to be
// scaled by 1 / (t N) with N such anchors: (P_i exp(s_ij / t - lse_i) - [j positive]) /
// (P_i + small); 0 for an anchor it drops.
EMBER_HOST_DEVICE double supcon_weight(bool positive, double s_over_t, double lse_i, double P_i, double loss_i,
                                       double small) {
  if (!(loss_i > 0)) return 0.0;
  return (P_i * std::exp(s_over_t - lse_i) - (positive ? 1.0 : 0.0)) / (P_i + small);
}

// ---- ProxyAnchor ----------------------------------------------------------------------------------
// Rows e_i and proxies p_c L2-normalised, s_ic = e_i . p_c. Per class c, with PML's logsumexp
// add_one form (a 0 joins the masked values, so a class without terms gives log 1 = 0):
//   pos_c = log(1 + sum over i with y_i == c of exp(alpha (margin - s_ic)))
//   neg_c = log(1 + sum over i with y_i != c of exp(alpha (s_ic + margin)))
// loss = sum_c pos_c / (classes present in the batch) + sum_c neg_c / C (DivisorReducer; the
// positive part is 0 when no class is present, i.e. an empty batch).
EMBER_HOST_DEVICE double proxy_anchor_exponent(bool positive, double s, double margin, double alpha) {
  return positive ? alpha * (margin - s) : alpha * (s + margin);
}

// d loss / d s_ic: lse_c is pos_c or neg_c, divisor the present classes or C.
EMBER_HOST_DEVICE double proxy_anchor_weight(bool positive, double s, double margin, double alpha, double lse_c,
                                             double divisor) {
  const double w = alpha * std::exp(proxy_anchor_exponent(positive, s, margin, alpha) - lse_c) / divisor;
  return positive ? -w : w;
}


// Note [Non-finite embeddings]: issue #12 wants a NaN or inf in the embeddings to show in the
// loss and its gradient exactly as in PyTorch + PML 2.8.1, so that a diverging run never looks
// healthy. There, F.normalize makes such a row NaN (an inf element gives NaN there and 0
// elsewhere), so every distance or similarity with it is NaN, and:
//   - a hinge term relu(NaN) is NaN, and AvgNonZeroReducer keeps only the terms > 0: the NaN
//     terms are dropped (contrastive_term, triplet_active and supcon_weight test `> 0` / `<`,
//     which NaN fails, so the kernels drop them as they are);
//   - a part with no term left, or no term at all, is PML's zero_loss, sum(embeddings * 0):
//     0 for finite embeddings, NaN otherwise, and its gradient is 0 everywhere (the graph of
//     sum(embeddings * 0) does not pass through the normalisation);
//   - when a term is kept, its gradient flows back through cdist / matmul, where the dropped
//     NaN pairs give 0 * NaN: every element of de is NaN;
//   - a reducer without a threshold (MeanReducer: NT-Xent, MultiSimilarity, ArcFace; Proxy-
//     Anchor's DivisorReducer) keeps the NaN terms: NaN value and gradient, which the kernels
//     give as they are (ArcFace: only the bad row's gradient is NaN, and all of W's).
// ember's rule, one "poison" scalar p = sum(embeddings * 0) computed on the device
// (losses/metric_common.h; the nonfinite_poison kernel): the forward kernels return p instead of
// 0 for a part with no term (nonfinite_part below); a gate below the normalisation (the
// zero_loss_gate kernel) makes the embeddings' gradient grad + p when some term was counted (all
// NaN for a non-finite row, unchanged for finite rows, where p is 0), else 0 everywhere, as PML's
// zero_loss does. One O(B D) pass each way and no value read on the host. The batch-hard
// miner's arg-max prefers NaN (ArgMax) as torch.max does, so the anchors that meet the NaN row
// mine NaN triplets, which AvgNonZeroReducer then drops. The CPU's GEMM distances keep NaN
// (never clamped to d = 0) and its sorted triplet path keeps NaN out of its sorts.
template <class T>
EMBER_HOST_DEVICE double nonfinite_part(double sum, double count, T poison) {
  return count > 0 ? sum / count : double(poison);
}

// ---- L2 distances (contrastive, triplet, batch-hard mining) ------------------------------------
// Note [L2 distances]: PML's LpDistance is torch.cdist(e, e, p=2) on the normalised rows,
// d_ij = ||e_i - e_j||. Its gradient with respect to e_i is dloss/dd_ij (e_i - e_j) / d_ij, and 0
// where d_ij == 0 (cdist's rule): the diagonal and identical rows give zero gradients, never NaN.
// The CPU takes d from a GEMM tile, d^2 = |e_i|^2 + |e_j|^2 - 2 e_i.e_j, which loses digits to
// cancellation when the rows are close: such pairs (is_near_pair) are recomputed from their
// differences, so identical rows get exactly d = 0 as with cdist's direct path, and their
// gradient is added from the differences too. The CUDA kernels always use the differences.

// Whether a pair is close enough that d^2 from dot products has lost digits: d^2 at most 2% of
// |e_i|^2 + |e_j|^2 (d below about 0.2 for unit rows).
constexpr double kNearPairFraction = 0.02;
EMBER_HOST_DEVICE bool is_near_pair(double d2, double n_i, double n_j) { return d2 <= kNearPairFraction * (n_i + n_j); }
// The same bound rounded to T, for the CPU's vectorised tile loops, which test d^2 in T: GCC keeps
// selects on double compares as branches without -fno-trapping-math.
template <class T>
EMBER_HOST_DEVICE T near_pair_bound(double n_i, double n_j) {
  return T(kNearPairFraction * (n_i + n_j));
}

// d^2 from the squared norms and the dot product, never below 0; NaN stays NaN (Note
// [Non-finite embeddings]: a pair with a non-finite row must not look like d = 0).
EMBER_HOST_DEVICE double squared_distance_from_dot(double s, double n_i, double n_j) {
  const double d2 = n_i + n_j - 2 * s;
  return d2 < 0 ? 0 : d2;
}

// The coefficient of (e_i - e_j) in dloss/de_i when dloss/dd_ij = g: g / d, and 0 at d == 0.
EMBER_HOST_DEVICE double distance_coefficient(double g, double d) { return d > 0 ? g / d : 0; }

// The running arg-max of a stream of (value, index): a larger value wins, a tie keeps the
// smaller index (batch-hard mining's hardest positive with d, hardest negative with -d). NaN
// wins over every number, as with torch.max (the smallest index among NaNs): an anchor whose
// search meets a non-finite row mines a NaN triplet (Note [Non-finite embeddings]).
struct ArgMax {
  double value = -INFINITY;
  int64_t index = -1;
  EMBER_HOST_DEVICE void offer(double v, int64_t i) {
    const bool v_nan = v != v;
    if (index >= 0 && value != value) {  // a NaN is held: only a NaN of smaller index replaces it
      if (v_nan && i < index) value = v, index = i;
    } else if (index < 0 || v_nan || v > value || (v == value && i < index)) {
      value = v, index = i;
    }
  }
  EMBER_HOST_DEVICE void merge(const ArgMax& o) {
    if (o.index >= 0) offer(o.value, o.index);
  }
};

// ---- Contrastive -------------------------------------------------------------------------------
// A positive pair's term relu(d - pos_margin), a negative pair's relu(neg_margin - d)
// (ContrastiveLoss, hinges not squared). Each part is averaged over its terms > 0
// (AvgNonZeroReducer) and the two parts are added.
EMBER_HOST_DEVICE double contrastive_term(bool positive, double d, double pos_margin, double neg_margin) {
  const double v = positive ? d - pos_margin : neg_margin - d;
  return v > 0 ? v : 0;
}

// d term / d d: +1 (positive) or -1 (negative) where the term is > 0, else 0 (relu'(0) = 0).
EMBER_HOST_DEVICE double contrastive_slope(bool positive, double d, double pos_margin, double neg_margin) {
  if (contrastive_term(positive, d, pos_margin, neg_margin) <= 0) return 0;
  return positive ? 1 : -1;
}

// ---- Triplet margin ------------------------------------------------------------------------------
// A triplet (a, p, n) has the term relu(d_ap - d_an + margin), written as t - d_an with the
// anchor-positive threshold t = d_ap + margin: it is > 0 exactly when d_an < t. Every backend
// tests that one inequality, so sorting the negatives (CPU) and scanning them (CUDA) agree on
// which triplets count. The loss averages the terms > 0 (AvgNonZeroReducer).
EMBER_HOST_DEVICE double triplet_threshold(double d_ap, double margin) { return d_ap + margin; }
EMBER_HOST_DEVICE bool triplet_active(double threshold, double d_an) { return d_an < threshold; }

}  // namespace ember
