// Triplet margin loss and batch-hard mining on CUDA (contract in ops/kernels.h, rules in
// ops/metric_rules.h; the CPU's ops/cpu/triplet.cpp sorts where these kernels scan). Note [Pair
// rows on CUDA] in pair_rows.cuh; distances from the differences (Note [L2 distances]).
//   rows kernel          one block per anchor a: its distance row into the block's slot of a
//                        (blocks, B) scratch, then threads over its positives p, each scanning
//                        the negatives for d_an < d_ap + margin: O(B^2) per anchor, no list;
//   finish kernel        one block: the mean over the terms > 0, in a fixed order;
//   terms' gradient      when the forward is asked for it (Note [Gradient in the forward] in
//                        ops/cpu/triplet_tiled.cpp): anchors in chunks of tiles.rows (scratch
//                        (rows, B), never B x B), three launches per chunk, in stream order:
//     coefficients       one block per chunk anchor a: c_aj = d(sum of terms)/d d_aj / d_aj;
//     other side         one block per row i: de_i += sum over the chunk's a of c_ai (e_i - e_a)
//                        (the first chunk zeroes de first);
//     anchor side        one block per chunk anchor a: de_a += sum_j c_aj (e_a - e_j).
//   given triplets       one thread per triplet for its two distances; the backward gives each
//                        row one block that scans the triplets naming it (O(B T) index reads).
//   mining               one block per anchor: a block reduction of two ArgMax.
// Each row of de is written by one block per launch and the launches run in order: no atomics.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), y (B) -> rows (B, 2): per anchor [sum of its terms > 0, their number]; scratch
// (gridDim.x, B) holds each block's current distance row.
template <class T>
__global__ void triplet_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E, const int64_t* __restrict__ y,
                                    double margin, double* __restrict__ scratch, double* __restrict__ rows) {
  __shared__ double red[32];
  double* d = scratch + int64_t(blockIdx.x) * B;
  for (int64_t a = blockIdx.x; a < B; a += gridDim.x) {
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) d[j] = row_distance(E, E, D, a, j);
    __syncthreads();
    double sum = 0, count = 0;
    for (int64_t p = threadIdx.x; p < B; p += blockDim.x) {
      if (p == a || y[p] != y[a]) continue;
      const double t = triplet_threshold(d[p], margin);
      for (int64_t n = 0; n < B; ++n)
        if (y[n] != y[a] && triplet_active(t, d[n])) sum += t - d[n], count += 1;
    }
    sum = block_reduce(sum, red, Sum{});  // its barriers also end every read of d
    count = block_reduce(count, red, Sum{});
    if (threadIdx.x == 0) rows[2 * a] = sum, rows[2 * a + 1] = count;
  }
}

// rows (N, 2) [sum, count] -> loss (0-d) = total / count (the poison without terms, Note
// [Non-finite embeddings]), triplets (0-d) = count. One block.
template <class T>
__global__ void triplet_finish_kernel(int64_t N, const double* __restrict__ rows, const T* __restrict__ poison,
                                      T* __restrict__ loss, double* __restrict__ triplets) {
  __shared__ double red[32];
  double total = 0, count = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) total += rows[2 * i], count += rows[2 * i + 1];
  total = block_reduce(total, red, Sum{});
  count = block_reduce(count, red, Sum{});
  if (threadIdx.x == 0) {
    loss[0] = T(nonfinite_part(total, count, poison[0]));
    triplets[0] = count;
  }
}

// Chunk anchors a0 + b, b < rows -> dist, coef (rows, B): d_aj and c_aj = g_aj / d_aj (0 without
// triplets), g_aj = #{n : d_an < d_aj + margin} for a positive j, -#{p : d_ap + margin > d_aj} for a
// negative: the coefficients of the terms' sum.
template <class T>
__global__ void triplet_coefficients_kernel(int64_t a0, int64_t rows, int64_t B, int64_t D, const T* __restrict__ E,
                                            const int64_t* __restrict__ y, double margin,
                                            const double* __restrict__ triplets, double* __restrict__ dist,
                                            double* __restrict__ coef) {
  const double scale = triplets[0] > 0 ? 1 : 0;
  for (int64_t b = blockIdx.x; b < rows; b += gridDim.x) {
    const int64_t a = a0 + b;
    double* d = dist + b * B;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) d[j] = row_distance(E, E, D, a, j);
    __syncthreads();
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      double g = 0;
      if (scale != 0 && j != a) {
        if (y[j] == y[a]) {
          const double t = triplet_threshold(d[j], margin);
          for (int64_t n = 0; n < B; ++n) g += y[n] != y[a] && triplet_active(t, d[n]) ? 1 : 0;
        } else {
          for (int64_t p = 0; p < B; ++p)
            g -= p != a && y[p] == y[a] && triplet_active(triplet_threshold(d[p], margin), d[j]) ? 1 : 0;
        }
      }
      coef[b * B + j] = distance_coefficient(scale * g, d[j]);
    }
    __syncthreads();
  }
}

// de_i += sum over b < rows of coef[b, i] (e_i - e_{a0 + b}) for every row i; zeroes de first
// when `first`.
template <class T>
__global__ void triplet_other_side_kernel(int64_t a0, int64_t rows, int64_t B, int64_t D, const T* __restrict__ E,
                                          const double* __restrict__ coef, bool first, T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    T* de = dE + i * D;
    if (first)
      for (int64_t d = threadIdx.x; d < D; d += blockDim.x) de[d] = T(0);
    add_weighted_differences(E + i * D, E + a0 * D, D, rows, de, chunk, [&](int64_t b) { return coef[b * B + i]; });
  }
}

// de_a += sum_j coef[a - a0, j] (e_a - e_j) for the chunk's anchors.
template <class T>
__global__ void triplet_anchor_side_kernel(int64_t a0, int64_t rows, int64_t B, int64_t D, const T* __restrict__ E,
                                           const double* __restrict__ coef, T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  for (int64_t b = blockIdx.x; b < rows; b += gridDim.x) {
    const int64_t a = a0 + b;
    add_weighted_differences(E + a * D, E, D, B, dE + a * D, chunk, [&](int64_t j) { return coef[b * B + j]; });
  }
}

// Given triplets -> dists (T, 2) [d_ap, d_an], terms (T, 2) [term, 1 if > 0].
template <class T>
__global__ void triplet_mined_terms_kernel(int64_t N, int64_t D, const T* __restrict__ E,
                                           const int64_t* __restrict__ A, const int64_t* __restrict__ P,
                                           const int64_t* __restrict__ Q, double margin, double* __restrict__ dists,
                                           double* __restrict__ terms) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < N; t += int64_t(gridDim.x) * blockDim.x) {
    const double d_ap = row_distance(E, E, D, A[t], P[t]), d_an = row_distance(E, E, D, A[t], Q[t]);
    const double th = triplet_threshold(d_ap, margin);
    const bool active = triplet_active(th, d_an);
    dists[2 * t] = d_ap, dists[2 * t + 1] = d_an;
    terms[2 * t] = active ? th - d_an : 0, terms[2 * t + 1] = active ? 1 : 0;
  }
}

// de_r = the gradient through the given triplets naming row r, for every row r.
template <class T>
__global__ void triplet_mined_rows_backward_kernel(int64_t B, int64_t N, int64_t D, const T* __restrict__ grad,
                                                   const T* __restrict__ E, const int64_t* __restrict__ A,
                                                   const int64_t* __restrict__ P, const int64_t* __restrict__ Q,
                                                   double margin, const double* __restrict__ dists,
                                                   const double* __restrict__ triplets, T* __restrict__ dE) {
  const double scale = triplets[0] > 0 ? double(grad[0]) / triplets[0] : 0;
  for (int64_t r = blockIdx.x; r < B; r += gridDim.x) {
    T* de = dE + r * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) de[d] = T(0);
    if (scale == 0) continue;
    for (int64_t t = 0; t < N; ++t) {
      const int64_t a = A[t], p = P[t], n = Q[t];
      if (a != r && p != r && n != r) continue;
      const double d_ap = dists[2 * t], d_an = dists[2 * t + 1];
      if (!triplet_active(triplet_threshold(d_ap, margin), d_an)) continue;
      const double c_ap = distance_coefficient(scale, d_ap), c_an = distance_coefficient(-scale, d_an);
      const T *ea = E + a * D, *ep = E + p * D, *en = E + n * D;
      for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
        double v = 0;
        if (a == r) v += c_ap * (double(ea[d]) - double(ep[d])) + c_an * (double(ea[d]) - double(en[d]));
        if (p == r) v += c_ap * (double(ep[d]) - double(ea[d]));
        if (n == r) v += c_an * (double(en[d]) - double(ea[d]));
        de[d] = T(double(de[d]) + v);
      }
    }
  }
}

// e, y -> hardest (B, 2): per anchor its hardest positive and negative, -1 for none.
template <class T>
__global__ void batch_hard_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E, const int64_t* __restrict__ y,
                                       int64_t* __restrict__ hardest) {
  __shared__ ArgMax scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    ArgMax pos, neg;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      const double d = row_distance(E, E, D, i, j);
      if (y[j] != y[i]) neg.offer(-d, j);
      else if (j != i) pos.offer(d, j);
    }
    pos = block_reduce(pos, scratch, MergeArgMax{});
    neg = block_reduce(neg, scratch, MergeArgMax{});
    if (threadIdx.x == 0) hardest[2 * i] = pos.index, hardest[2 * i + 1] = neg.index;
  }
}

unsigned row_blocks(int64_t B) { return blocks_for(B, 1); }
const TensorOptions f64_on(const Tensor& like) { return {.dtype = DType::f64, .device = like.device()}; }

// de (B, D) = d(sum of the terms > 0) / de, 0 without terms.
void term_gradient(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                   const Tensor& triplets, const Tensor& de) {
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    const int64_t R = std::min(B, tiles.rows);
    const Tensor dist = Tensor::empty({R, B}, f64_on(e)), coef = Tensor::empty({R, B}, f64_on(e));
    for (int64_t a0 = 0; a0 < B; a0 += R) {
      const int64_t rows = std::min(R, B - a0);
      launch<triplet_coefficients_kernel<T>>(row_blocks(rows), kThreads, 0, Stream{}, a0, rows, B, D, e.data<T>(),
                                             labels.data<int64_t>(), margin, triplets.data<double>(),
                                             dist.data<double>(), coef.data<double>());
      launch<triplet_other_side_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, a0, rows, B, D, e.data<T>(),
                                           coef.data<double>(), a0 == 0, de.data<T>());
      launch<triplet_anchor_side_kernel<T>>(row_blocks(rows), kThreads, 0, Stream{}, a0, rows, B, D, e.data<T>(),
                                            coef.data<double>(), de.data<T>());
    }
  });
}

void triplet_forward_cuda(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                          const Tensor& poison, const Tensor& loss, const Tensor& triplets, const Tensor& term_grad) {
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    const Tensor rows = Tensor::empty({B, 2}, f64_on(e));
    if (B > 0) {
      const unsigned blocks = row_blocks(B);
      const Tensor scratch = Tensor::empty({int64_t(blocks), B}, f64_on(e));
      launch<triplet_rows_kernel<T>>(blocks, kThreads, 0, Stream{}, B, D, e.data<T>(), labels.data<int64_t>(), margin,
                                     scratch.data<double>(), rows.data<double>());
    }
    launch<triplet_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, rows.data<double>(), poison.data<T>(),
                                     loss.data<T>(), triplets.data<double>());
  });
  if (term_grad.defined()) term_gradient(tiles, e, labels, margin, triplets, term_grad);
}

void triplet_mined_forward_cuda(const Tensor& e, const Tensor& anchors, const Tensor& positives,
                                const Tensor& negatives, double margin, const Tensor& poison, const Tensor& dists,
                                const Tensor& loss, const Tensor& triplets) {
  dispatch_float(e.dtype(), "triplet_margin_loss", [&]<class T>(TypeTag<T>) {
    const int64_t N = anchors.size(0), D = e.size(1);
    const Tensor terms = Tensor::empty({N, 2}, f64_on(e));
    if (N > 0)
      launch<triplet_mined_terms_kernel<T>>(blocks_for(N, kThreads), kThreads, 0, Stream{}, N, D, e.data<T>(),
                                            anchors.data<int64_t>(), positives.data<int64_t>(),
                                            negatives.data<int64_t>(), margin, dists.data<double>(),
                                            terms.data<double>());
    launch<triplet_finish_kernel<T>>(1, kThreads, 0, Stream{}, N, terms.data<double>(), poison.data<T>(),
                                     loss.data<T>(), triplets.data<double>());
  });
}

void triplet_mined_backward_cuda(const Tensor& grad, const Tensor& e, const Tensor& anchors, const Tensor& positives,
                                 const Tensor& negatives, double margin, const Tensor& dists, const Tensor& triplets,
                                 const Tensor& de) {
  dispatch_float(e.dtype(), "triplet_margin_loss_backward", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1), N = anchors.size(0);
    if (B == 0) return;
    launch<triplet_mined_rows_backward_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, N, D, grad.data<T>(),
                                                  e.data<T>(), anchors.data<int64_t>(), positives.data<int64_t>(),
                                                  negatives.data<int64_t>(), margin, dists.data<double>(),
                                                  triplets.data<double>(), de.data<T>());
  });
}

void batch_hard_mine_cuda(const PairTiles&, const Tensor& e, const Tensor& labels, const Tensor& hardest) {
  dispatch_float(e.dtype(), "batch_hard_miner", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    launch<batch_hard_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, e.data<T>(), labels.data<int64_t>(),
                                      hardest.data<int64_t>());
  });
}

}  // namespace

void bind_triplet_kernels() {
  ember::triplet_forward_kernel.set_cuda(&triplet_forward_cuda);
  ember::triplet_mined_forward_kernel.set_cuda(&triplet_mined_forward_cuda);
  ember::triplet_mined_backward_kernel.set_cuda(&triplet_mined_backward_cuda);
  ember::batch_hard_mine_kernel.set_cuda(&batch_hard_mine_cuda);
}

}  // namespace ember::cuda
