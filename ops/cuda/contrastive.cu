// Contrastive loss on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h; the CPU's
// ops/cpu/contrastive.cpp computes the same in tiles). Note [Pair rows on CUDA] in pair_rows.cuh:
//   rows kernel      one block per anchor i: its positive and negative terms and their counts
//                    (distances from the differences, Note [L2 distances]);
//   finish kernel    one block: each part's mean over its terms > 0, in a fixed order;
//   backward kernel  one block per anchor: de_i = sum_j c_ij (e_i - e_j), c_ij = d loss/d d_ij / d_ij.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), y (B) -> rows (B, 4): per anchor [positive sum, positive terms > 0, negative sum,
// negative terms > 0].
template <class T>
__global__ void contrastive_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E, const int64_t* __restrict__ y,
                                        double pos_margin, double neg_margin, double* __restrict__ rows) {
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    double acc[4] = {0, 0, 0, 0};
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      if (j == i) continue;
      const bool positive = y[j] == y[i];
      const double v = contrastive_term(positive, row_distance(E, E, D, i, j), pos_margin, neg_margin);
      if (v > 0) acc[positive ? 0 : 2] += v, acc[positive ? 1 : 3] += 1;
    }
    for (int k = 0; k < 4; ++k) acc[k] = block_reduce(acc[k], scratch, Sum{});
    if (threadIdx.x == 0)
      for (int k = 0; k < 4; ++k) rows[4 * i + k] = acc[k];
  }
}

// rows -> loss (0-d) = positive sum / P + negative sum / N (each the poison when its count is 0,
// Note [Non-finite embeddings]), counts (2) = [P, N]. One block.
template <class T>
__global__ void contrastive_finish_kernel(int64_t B, const double* __restrict__ rows, const T* __restrict__ poison,
                                          T* __restrict__ loss, double* __restrict__ counts) {
  __shared__ double scratch[32];
  double acc[4] = {0, 0, 0, 0};
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x)
    for (int k = 0; k < 4; ++k) acc[k] += rows[4 * i + k];
  for (int k = 0; k < 4; ++k) acc[k] = block_reduce(acc[k], scratch, Sum{});
  if (threadIdx.x == 0) {
    loss[0] = T(nonfinite_part(acc[0], acc[1], poison[0]) + nonfinite_part(acc[2], acc[3], poison[0]));
    counts[0] = acc[1], counts[1] = acc[3];
  }
}

// grad (0-d), e, y, counts -> de (B, D).
template <class T>
__global__ void contrastive_backward_rows_kernel(int64_t B, int64_t D, const T* __restrict__ grad,
                                                 const T* __restrict__ E, const int64_t* __restrict__ y,
                                                 double pos_margin, double neg_margin,
                                                 const double* __restrict__ counts, T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  const double g = double(grad[0]), P = counts[0], N = counts[1];
  // Both orders of a pair: 2 / count.
  const double pos_scale = P > 0 ? 2 * g / P : 0, neg_scale = N > 0 ? 2 * g / N : 0;
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    T* de = dE + i * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) de[d] = T(0);
    add_weighted_differences(E + i * D, E, D, P + N > 0 ? B : 0, de, chunk, [&](int64_t j) -> double {
      if (j == i) return 0;
      const bool positive = y[j] == y[i];
      const double d = row_distance(E, E, D, i, j);
      return distance_coefficient(
          contrastive_slope(positive, d, pos_margin, neg_margin) * (positive ? pos_scale : neg_scale), d);
    });
  }
}

unsigned row_blocks(int64_t B) { return blocks_for(B, 1); }

void contrastive_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& labels, double pos_margin,
                              double neg_margin, const Tensor& poison, const Tensor& counts, const Tensor& loss) {
  dispatch_float(e.dtype(), "contrastive_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    const Tensor rows = Tensor::empty({B, 4}, {.dtype = DType::f64, .device = e.device()});
    if (B > 0)
      launch<contrastive_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, e.data<T>(),
                                         labels.data<int64_t>(), pos_margin, neg_margin, rows.data<double>());
    launch<contrastive_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, rows.data<double>(), poison.data<T>(),
                                         loss.data<T>(), counts.data<double>());
  });
}

void contrastive_backward_cuda(const PairTiles&, const Tensor& grad, const Tensor& e, const Tensor& labels,
                               double pos_margin, double neg_margin, const Tensor& counts, const Tensor& de) {
  dispatch_float(e.dtype(), "contrastive_loss_backward", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    launch<contrastive_backward_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, grad.data<T>(),
                                                e.data<T>(), labels.data<int64_t>(), pos_margin, neg_margin,
                                                counts.data<double>(), de.data<T>());
  });
}

}  // namespace

void bind_contrastive_kernels() {
  ember::contrastive_forward_kernel.set_cuda(&contrastive_forward_cuda);
  ember::contrastive_backward_kernel.set_cuda(&contrastive_backward_cuda);
}

}  // namespace ember::cuda
