// All-triplet margin loss on the CPU for batches of small classes (ops/cpu/triplet_tiled.h; rules
// in ops/metric_rules.h, the tile passes in ops/cpu/self_similarity_passes.h).
//
// Note [Triplets in tiles]: anchor a's terms are relu(t_ap - d_an), t_ap = d_ap + margin, over its
// positives p and its negatives n. When every row has few positives, their thresholds are
// computed first, from the rows' differences (PositiveSlots: slot s of row a is its s-th positive
// in ascending order); then whether a triplet counts is one distance d_an against one threshold,
// and the distances stream in the symmetric tiles of the other pair losses, each tile computed
// once for the rows of both its blocks (Note [Symmetric tile rounds]). Per tile row (i, j):
//   terms     for each slot s of row i, t_is - d_ij where d_ij < t_is, and m_is += their number;
//             in an off-diagonal tile the same for the column row j's slots (anchor j). The row's
//             own label (its positives, itself) is masked to +inf, above every threshold.
//   gradient  (when wanted: Note [Gradient in the forward]) a negative pair {i, j} carries
//             k_ij = #{s : d_ij < t_is} + #{s : d_ij < t_js} triplets, anchor i's and anchor
//             j's, so d(sum of terms) / d d_ij = -k_ij: symmetric weights, one GEMM-worth of
//             weighted sums over the pass. After it each positive pair {a, p} adds
//             (m_a(p) + m_p(a)) / d_ap (e_a - e_p) from the differences.
// Per forward + backward that is one and a half GEMM-worths of B^2 D (half a GEMM of distances,
// one of weighted sums) where whole rows of distances per anchor block took four (the distances
// twice, and two weighted sums whose pairs could not be folded), and per pair a compare per
// threshold in T, vectorised over the tile row. Each row's tiles come in a fixed order and the
// counts are integers, so the results do not depend on the thread count. The thresholds cost
// slots x B values three times over, hence the bound kMaxTiledPositives; and the per-pair work
// grows with the slots, where sorting a row's negatives (ops/cpu/triplet.cpp, Note [Few
// positives]) stops growing. Measured at B 512, D 128, 4 per class (lossprobe, 2 threads, ms per
// forward + backward): whole rows 2.2, tiles with the gradient in the backward 1.18-1.38, in
// the forward 0.82-1.06; `ember bench losses` 1.67 -> 1.16 -> 0.85.

#include "ops/cpu/triplet_tiled.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "ops/cpu/class_members.h"
#include "ops/cpu/self_similarity_passes.h"
#include "ops/metric_rules.h"

namespace ember::cpu {
namespace {

// Each row's positives in slots, slot s of row i its s-th positive in ascending order:
//   thresholds(s) (B) of T: t_is = d_is + margin; -1, below every distance, past the row's
//                 positives or where d_is is NaN (Note [Non-finite embeddings]: it counts nothing)
//   distance(s, i): d_is from the rows' differences (row_distance), in double
template <class T>
class PositiveSlots {
 public:
  PositiveSlots(ClassMembers members, const T* E, int64_t B, int64_t D, double margin, DType dtype)
      : members_(std::move(members)), B_(B) {
    for (int64_t i = 0; i < B; ++i) slots_ = std::max(slots_, count(i));
    thresholds_ = Tensor::empty({slots_ * B}, {.dtype = dtype});
    distances_ = Tensor::empty({slots_ * B}, {.dtype = DType::f64});
    T* t = thresholds_.data<T>();
    double* d = distances_.data<double>();
    parallel_for(0, B, 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t s = 0; s < slots_; ++s) {
          const double dist = s < count(i) ? distance(E + i * D, E + positive(i, s) * D, D) : 0.0;
          d[s * B + i] = dist;
          t[s * B + i] = s < count(i) && dist == dist ? T(triplet_threshold(dist, margin)) : T(-1);
        }
    });
  }

  // |a - b| in double: row_distance's formula summed in lanes (B x slots of them per pass).
  static double distance(const T* a, const T* b, int64_t D) {
    return std::sqrt(lane_sum(D, [&](int64_t k) {
      const double diff = double(a[k]) - double(b[k]);
      return diff * diff;
    }));
  }

  int64_t slots() const { return slots_; }
  int64_t count(int64_t i) const { return int64_t(members_.of(i).size()) - 1; }
  int64_t positive(int64_t i, int64_t s) const { return members_.of(i)[size_t(s < rank(i) ? s : s + 1)]; }
  // The slot of row i among the positives of p (a positive of i).
  int64_t slot_in(int64_t p, int64_t i) const { return rank(i) - (rank(p) < rank(i) ? 1 : 0); }
  const T* thresholds(int64_t s) const { return thresholds_.data<T>() + s * B_; }
  double distance(int64_t s, int64_t i) const { return distances_.data<double>()[s * B_ + i]; }

 private:
  int64_t rank(int64_t i) const {  // i's place among the rows of its label
    const std::span<const int64_t> m = members_.of(i);
    return std::lower_bound(m.begin(), m.end(), i) - m.begin();
  }

  ClassMembers members_;
  int64_t B_, slots_ = 0;
  Tensor thresholds_, distances_;
};

// masked[k] = d[k] where the column's label differs from row i's, +inf where it is row i's (its
// positives and i itself), above every threshold.
template <class T>
void mask_own_label(const T* d, const int64_t* yc, int64_t yi, int64_t width, T* masked) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (int64_t k = 0; k < width; ++k) masked[k] = yc[k] != yi ? d[k] : inf;
}

// Note [Gradient in the forward]: a loss whose backward brings nothing but its scalar upstream
// gradient g has d loss / dx = g G, G its gradient at g = 1, which the forward can compute. Here
// the loss is (sum of the terms > 0) / T, so G is taken as d(sum of terms) / de and scaled by
// g / T. The pass that finds the terms has every distance and threshold G needs at hand, so when
// a gradient will be wanted (the caller passes term_grad) it accumulates G in the same tiles:
// the distances are streamed once per step instead of twice (ArcFace and ProxyAnchor do the same
// with their cosines: Note [Whole rows of cross similarities]). With no gradient wanted (no grad
// mode, or rows that do not require one) nothing of G is computed. G lives from the forward to
// the backward, the size of the gradient, and the backward scales it in place and hands it over
// unless the graph is retained (scaled_forward_gradient in losses/metric_common.h).
template <class T>
void tiled_typed(const PairTiles& tiles, ClassMembers members, const Tensor& e, const Tensor& labels, double margin,
                 const Tensor& poison, const Tensor& loss, const Tensor& triplets, const Tensor& term_grad) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const PositiveSlots<T> slots(std::move(members), E, B, D, margin, e.dtype());
  const DistanceTiles<T> distances(E, B, D, tiles.rows);
  const double* n = distances.norms.template data<double>();
  // Per row: its terms as an anchor from tile rows and from tile columns, and the sum of its far
  // pairs' coefficients; per slot: m_is (counts, exact in T).
  const Tensor sums = Tensor::empty({3 * B}, {.dtype = DType::f64});
  const Tensor active = Tensor::empty({slots.slots() * B}, {.dtype = e.dtype()});
  double* row_terms = sums.data<double>();
  double* column_terms = row_terms + B;
  double* rs = column_terms + B;
  T* m = active.data<T>();
  std::fill(row_terms, row_terms + 3 * B, 0.0);
  std::fill(m, m + slots.slots() * B, T(0));
  const bool with_gradient = term_grad.defined();

  // Tile row (i, [c0, c1)): the terms and counts of anchor i's triplets through its pairs and, in
  // an off-diagonal tile, of the column rows' (anchors of the other block); returns k_ij, the
  // triplets through each pair, both anchors', when with_gradient. scratch: 4 (c1 - c0) of T.
  auto count_row = [&](int64_t i, int64_t c0, int64_t c1, const T* d, T* scratch) {
    const int64_t width = c1 - c0;
    const bool off_diagonal = i < c0 || i >= c1;
    T* masked = scratch;
    T* through = scratch + width;
    T* row_term = through + width;  // per column: anchor i's terms t_is - d_ij > 0 over its slots
    T* column_term = row_term + width;  // and anchor j's, t_js - d_ij
    mask_own_label(d, y + c0, y[i], width, masked);
    std::fill(through, through + 3 * width, T(0));
    for (int64_t s = 0; s < slots.count(i); ++s) {  // selects in T (Note [Vectorised tile rows])
      const T t = slots.thresholds(s)[i];
      int64_t below = 0;
      for (int64_t k = 0; k < width; ++k) {
        const bool on = masked[k] < t;
        row_term[k] += on ? t - masked[k] : T(0), through[k] += on ? T(1) : T(0), below += on ? 1 : 0;
      }
      m[s * B + i] += T(below);
    }
    row_terms[i] += lane_sum(width, [&](int64_t k) { return row_term[k]; });
    if (off_diagonal) {
      for (int64_t s = 0; s < slots.slots(); ++s) {
        const T* t = slots.thresholds(s) + c0;
        T* mc = m + s * B + c0;
        for (int64_t k = 0; k < width; ++k) {
          const bool on = masked[k] < t[k];
          column_term[k] += on ? t[k] - masked[k] : T(0), through[k] += on ? T(1) : T(0), mc[k] += on ? T(1) : T(0);
        }
      }
      for (int64_t k = 0; k < width; ++k) column_terms[c0 + k] += double(column_term[k]);
    } else if (with_gradient) {  // the diagonal tile's column rows count as its rows; k_ij needs both
      for (int64_t s = 0; s < slots.slots(); ++s) {
        const T* t = slots.thresholds(s) + c0;
        for (int64_t k = 0; k < width; ++k) through[k] += masked[k] < t[k] ? T(1) : T(0);
      }
    }
    return static_cast<const T*>(through);
  };

  T* dE = with_gradient ? term_grad.data<T>() : nullptr;
  if (with_gradient) {
    accumulate_pair_gradient<T>(tiles, distances, e.dtype(), dE,
                                [&](int64_t i, int64_t c0, int64_t c1, const T* d, T* w, T* scratch) {
                                  const T* through = count_row(i, c0, c1, d, scratch);
                                  // of (e_i - e_j) in G_i: -k_ij / d_ij, 0 at d = 0
                                  auto coefficient = [=](int64_t k) {
                                    const bool on = (through[k] > T(0)) & (d[k] > T(0));
                                    return (on ? -through[k] : T(0)) / (on ? d[k] : T(1));
                                  };
                                  split_distance_coefficients(i, c0, c1, d, n, E, D, coefficient, w, rs, dE);
                                });
  } else {
    for_each_symmetric_tile<T>(B, tiles.rows, e.dtype(),
                               [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, TileBuffers<T>& buf) {
                                 const T* S = distances(r0, r1, c0, c1, buf);
                                 for (int64_t i = r0; i < r1; ++i)
                                   count_row(i, c0, c1, S + (i - r0) * (c1 - c0), buf.column_scratch);
                               });
  }

  double total = 0, count = 0;
  for (int64_t i = 0; i < B; ++i) {
    total += row_terms[i] + column_terms[i];
    for (int64_t s = 0; s < slots.count(i); ++s) count += double(m[s * B + i]);
  }
  loss.data<T>()[0] = T(nonfinite_part(total, count, poison.data<T>()[0]));  // Note [Non-finite embeddings]
  triplets.data<double>()[0] = count;
  if (!with_gradient) return;
  if (count == 0) {  // no term: G is 0 (the GEMM's 0 x a non-finite row would not be)
    std::fill(dE, dE + B * D, T(0));
    return;
  }
  parallel_for(0, B, 16, [&](int64_t i0, int64_t i1) {  // the positive pairs, each row by its task
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t s = 0; s < slots.count(i); ++s) {
        const int64_t p = slots.positive(i, s);
        const double through = double(m[s * B + i]) + double(m[slots.slot_in(p, i) * B + p]);
        add_scaled_difference(dE + i * D, distance_coefficient(through, slots.distance(s, i)), E + i * D,
                              E + p * D, D);
      }
  });
  add_row_sum_terms(E, B, D, rs, dE);
}

}  // namespace

bool triplet_tiled(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin, const Tensor& poison,
                   const Tensor& loss, const Tensor& triplets, const Tensor& term_grad) {
  ClassMembers members(labels.data<int64_t>(), labels.size(0));  // the tiles' slots take these lists
  for (int64_t i = 0; i < labels.size(0); ++i)
    if (int64_t(members.of(i).size()) - 1 > kMaxTiledPositives) return false;
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    tiled_typed<T>(tiles, std::move(members), e, labels, margin, poison, loss, triplets, term_grad);
  });
  return true;
}

}  // namespace ember::cpu
