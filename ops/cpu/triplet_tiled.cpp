// All-triplet margin loss on the CPU for batches of small classes (ops/cpu/triplet_tiled.h; rules
// in ops/metric_rules.h, the tile passes in ops/cpu/self_similarity_passes.h).
//
// Note [Triplets in tiles]: anchor a's terms are relu(t_ap - d_an), t_ap = d_ap + margin, over its
// positives p and its negatives n. When every row has few positives, their thresholds are
// computed first, from the rows' differences (PositiveSlots: slot s of row a is its s-th positive
// in ascending order); then whether a triplet counts is one distance d_an against one threshold,
// and the distances stream in the symmetric tiles of the other pair losses, each tile computed
// once for the rows of both its blocks:
//   forward   per row a and slot s: m_as = #{n : d_an < t_as} and the sum of those d_an, tile by
//             tile, into the row's sum of terms m_as t_as - sum and its count m_as. The row's own
//             label (its positives, itself) is masked to +inf, above every threshold.
//   backward  a negative pair {i, j} carries k_ij = #{s : d_ij < t_is} + #{s : d_ij < t_js}
//             triplets, anchor i's and anchor j's, so d loss / d d_ij = -scale k_ij: symmetric
//             weights, one pass of tiles with one GEMM-worth of weighted sums. The same pass counts
//             m_as again (a tile's rows for their own slots, an off-diagonal tile's columns for
//             theirs, from the thresholds kept by slot); after it each positive pair {a, p} adds
//             scale (m_a(p) + m_p(a)) / d_ap (e_a - e_p) from the differences.
// Per forward + backward that is two GEMM-worths of B^2 D (half a GEMM of distances forward, half
// again backward, one of weighted sums) where whole rows of distances per anchor block took four
// (the distances twice, and two weighted sums whose pairs could not be folded), and per pair a
// compare per threshold in T, vectorised over the tile row. Each row's tiles come in a fixed
// order (Note [Symmetric tile rounds]) and the counts are integers, so the results do not depend
// on the thread count. The thresholds cost slots x B values three times over, hence the bound
// kMaxTiledPositives; and the per-pair work grows with the slots, where sorting a row's negatives
// (ops/cpu/triplet.cpp, Note [Few positives]) stops growing.
#include "ops/cpu/triplet_tiled.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

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
  PositiveSlots(const T* E, int64_t B, int64_t D, const int64_t* y, double margin, DType dtype)
      : members_(y, B), B_(B) {
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

template <class T>
void forward_typed(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                   const Tensor& poison, const Tensor& loss, const Tensor& triplets) {
  const int64_t B = e.size(0), D = e.size(1);
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const PositiveSlots<T> slots(E, B, D, y, margin, e.dtype());
  const Tensor rows = Tensor::empty({B, 2}, {.dtype = DType::f64});  // per anchor [sum of terms, terms > 0]
  double* row = rows.data<double>();
  std::fill(row, row + 2 * B, 0.0);
  auto fold = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, const T* dist, T* scratch) {
    const int64_t width = c1 - c0;
    T* masked = scratch;
    T* terms = scratch + width;  // per column: the sum of its terms t_is - d_in > 0 over the slots
    T* counted = terms + width;  // and their number
    for (int64_t i = r0; i < r1; ++i) {
      mask_own_label(dist + (i - r0) * width, y + c0, y[i], width, masked);
      std::fill(terms, terms + 2 * width, T(0));
      for (int64_t s = 0; s < slots.count(i); ++s) {  // selects in T (Note [Vectorised tile rows])
        const T t = slots.thresholds(s)[i];
        for (int64_t k = 0; k < width; ++k) {
          const bool on = masked[k] < t;
          terms[k] += on ? t - masked[k] : T(0), counted[k] += on ? T(1) : T(0);
        }
      }
      row[2 * i] += lane_sum(width, [&](int64_t k) { return terms[k]; });
      row[2 * i + 1] += lane_sum(width, [&](int64_t k) { return counted[k]; });
    }
  };
  for_each_pair_tile<T>(tiles, DistanceTiles<T>(E, B, D, tiles.rows), e.dtype(), fold);

  double total = 0, count = 0;
  for (int64_t a = 0; a < B; ++a) total += row[2 * a], count += row[2 * a + 1];
  loss.data<T>()[0] = T(nonfinite_part(total, count, poison.data<T>()[0]));  // Note [Non-finite embeddings]
  triplets.data<double>()[0] = count;
}

template <class T>
void backward_typed(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels, double margin,
                    const Tensor& triplets, const Tensor& de) {
  const int64_t B = e.size(0), D = e.size(1);
  T* dE = de.data<T>();
  std::fill(dE, dE + B * D, T(0));
  const double count = triplets.data<double>()[0];
  if (count == 0) return;
  const double scale = double(grad.data<T>()[0]) / count;
  const T* E = e.data<T>();
  const int64_t* y = labels.data<int64_t>();
  const PositiveSlots<T> slots(E, B, D, y, margin, e.dtype());
  const DistanceTiles<T> distances(E, B, D, tiles.rows);
  const double* n = distances.norms.template data<double>();
  // m_is by slot (counts, exact in T), and per row the sum of its far pairs' coefficients.
  const Tensor active = Tensor::empty({slots.slots() * B}, {.dtype = e.dtype()});
  const Tensor row_sums = Tensor::empty({B}, {.dtype = DType::f64});
  T* m = active.data<T>();
  double* rs = row_sums.data<double>();
  std::fill(m, m + slots.slots() * B, T(0));
  std::fill(rs, rs + B, 0.0);
  const T scale_t = T(scale);
  auto row_weights = [&](int64_t i, int64_t c0, int64_t c1, const T* d, T* w, T* scratch) {
    const int64_t width = c1 - c0;
    const bool off_diagonal = i < c0 || i >= c1;  // the tile's columns are anchors of their own block
    T* masked = scratch;
    T* through = scratch + width;  // k_ij: the triplets through the pair (i, c0 + k)
    mask_own_label(d, y + c0, y[i], width, masked);
    std::fill(through, through + width, T(0));
    for (int64_t s = 0; s < slots.count(i); ++s) {  // anchor i's triplets
      const T t = slots.thresholds(s)[i];
      int64_t below = 0;
      for (int64_t k = 0; k < width; ++k) {
        const bool on = masked[k] < t;
        through[k] += on ? T(1) : T(0), below += on ? 1 : 0;
      }
      m[s * B + i] += T(below);
    }
    for (int64_t s = 0; s < slots.slots(); ++s) {  // anchor c0 + k's triplets
      const T* t = slots.thresholds(s) + c0;
      T* mc = m + s * B + c0;
      if (off_diagonal) {
        for (int64_t k = 0; k < width; ++k) {
          const T on = masked[k] < t[k] ? T(1) : T(0);
          through[k] += on, mc[k] += on;
        }
      } else {  // the diagonal tile counts the column rows' m as its rows
        for (int64_t k = 0; k < width; ++k) through[k] += masked[k] < t[k] ? T(1) : T(0);
      }
    }
    const T st = scale_t;  // a local: not reloaded per pair
    auto coefficient = [=](int64_t k) {  // of (e_i - e_j) in de_i: -scale k_ij / d_ij, 0 at d = 0
      const bool on = (through[k] > T(0)) & (d[k] > T(0));
      return (on ? -st * through[k] : T(0)) / (on ? d[k] : T(1));
    };
    split_distance_coefficients(i, c0, c1, d, n, E, D, coefficient, w, rs, dE);
  };
  accumulate_pair_gradient<T>(tiles, distances, e.dtype(), dE, row_weights);

  parallel_for(0, B, 16, [&](int64_t i0, int64_t i1) {  // the positive pairs, each row by its task
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t s = 0; s < slots.count(i); ++s) {
        const int64_t p = slots.positive(i, s);
        const double through = double(m[s * B + i]) + double(m[slots.slot_in(p, i) * B + p]);
        add_scaled_difference(dE + i * D, distance_coefficient(scale * through, slots.distance(s, i)), E + i * D,
                              E + p * D, D);
      }
  });
  add_row_sum_terms(E, B, D, rs, dE);
}

}  // namespace

bool triplets_fit_tiles(const Tensor& labels) {
  const ClassMembers members(labels.data<int64_t>(), labels.size(0));
  for (int64_t i = 0; i < labels.size(0); ++i)
    if (int64_t(members.of(i).size()) - 1 > kMaxTiledPositives) return false;
  return true;
}

void triplet_forward_tiled(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                           const Tensor& poison, const Tensor& loss, const Tensor& triplets) {
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    forward_typed<T>(tiles, e, labels, margin, poison, loss, triplets);
  });
}

void triplet_backward_tiled(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                            double margin, const Tensor& triplets, const Tensor& de) {
  dispatch_float(e.dtype(), "triplet_margin_loss_backward", [&]<class T>(TypeTag<T>) {
    backward_typed<T>(tiles, grad, e, labels, margin, triplets, de);
  });
}

}  // namespace ember::cpu
