// SupCon on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h, the CPU's
// ops/cpu/supcon.cpp computes the same in tiles). Note [Pair rows on CUDA] in pair_rows.cuh:
//   rows kernel      one block per anchor i: lse_i over every j != i (a block reduction of
//                    OnlineLogSumExp), its positive count P_i and sum S_i of s_ij / t, then loss_i;
//   finish kernel    one block: the mean of the anchor losses > 0, in a fixed order;
//   backward kernel  one block per anchor: de_i = sum_j (dloss/ds_ij + dloss/ds_ji) e_j.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), y (B) -> stats (B, 3) [lse_i, P_i, loss_i] per anchor.
template <class T>
__global__ void supcon_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E, const int64_t* __restrict__ y,
                                   double inv_t, double small, double* __restrict__ stats) {
  __shared__ OnlineLogSumExp lse_scratch[32];
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    OnlineLogSumExp all;
    double P = 0, S = 0;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      if (j == i) continue;
      const double x = double(row_dot(E, E, D, i, j)) * inv_t;
      all.add(x);
      if (y[j] == y[i]) P += 1, S += x;
    }
    const double lse = block_reduce(all, lse_scratch, MergeLogSumExp{}).value();
    P = block_reduce(P, scratch, Sum{});
    S = block_reduce(S, scratch, Sum{});
    if (threadIdx.x == 0) {
      stats[3 * i] = lse, stats[3 * i + 1] = P;
      stats[3 * i + 2] = supcon_anchor_loss(P, lse, S, small);
    }
  }
}

// stats -> loss (0-d) = the mean of the anchor losses > 0, anchors (0-d) = their number; both 0
// without a positive or a negative pair, or without such an anchor. One block.
template <class T>
__global__ void supcon_finish_kernel(int64_t B, const double* __restrict__ stats, const T* __restrict__ poison,
                                     T* __restrict__ loss, double* __restrict__ anchors) {
  __shared__ double scratch[32];
  double total = 0, kept = 0, positives = 0, negatives = 0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
    const double P = stats[3 * i + 1], loss_i = stats[3 * i + 2];
    if (loss_i > 0) total += loss_i, kept += 1;
    positives += P;
    negatives += P < double(B - 1) ? 1 : 0;
  }
  total = block_reduce(total, scratch, Sum{});
  kept = block_reduce(kept, scratch, Sum{});
  positives = block_reduce(positives, scratch, Sum{});
  negatives = block_reduce(negatives, scratch, Sum{});
  if (threadIdx.x == 0) {
    const bool defined = positives > 0 && negatives > 0 && kept > 0;
    loss[0] = defined ? T(total / kept) : poison[0];  // Note [Non-finite embeddings]
    anchors[0] = defined ? kept : 0;
  }
}

// grad (0-d), e, y, stats, anchors -> de (B, D).
template <class T>
__global__ void supcon_backward_rows_kernel(int64_t B, int64_t D, const T* __restrict__ grad,
                                            const T* __restrict__ E, const int64_t* __restrict__ y, double inv_t,
                                            double small, const double* __restrict__ stats,
                                            const double* __restrict__ anchors, T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  const double N = anchors[0];
  const double scale = N == 0 ? 0 : double(grad[0]) * inv_t / N;
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    accumulate_weighted_rows(E, D, N == 0 ? 0 : B, dE + i * D, chunk, [&](int64_t j) -> double {
      if (j == i) return 0;
      const double x = double(row_dot(E, E, D, i, j)) * inv_t;
      const bool positive = y[j] == y[i];
      const double* a = stats + 3 * i;
      const double* b = stats + 3 * j;
      return scale * (supcon_weight(positive, x, a[0], a[1], a[2], small) +
                      supcon_weight(positive, x, b[0], b[1], b[2], small));
    });
  }
}

unsigned row_blocks(int64_t B) { return blocks_for(B, 1); }

void supcon_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& labels, double temperature,
                         const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& anchors) {
  dispatch_float(e.dtype(), "supcon_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B > 0)
      launch<supcon_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, e.data<T>(), labels.data<int64_t>(),
                                    1.0 / temperature, small_val<T>(), stats.data<double>());
    launch<supcon_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, stats.data<double>(), poison.data<T>(),
                                    loss.data<T>(), anchors.data<double>());
  });
}

void supcon_backward_cuda(const PairTiles&, const Tensor& grad, const Tensor& e, const Tensor& labels,
                          double temperature, const Tensor& stats, const Tensor& anchors, const Tensor& de) {
  dispatch_float(e.dtype(), "supcon_loss_backward", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    launch<supcon_backward_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, grad.data<T>(), e.data<T>(),
                                           labels.data<int64_t>(), 1.0 / temperature, small_val<T>(),
                                           stats.data<double>(), anchors.data<double>(), de.data<T>());
  });
}

}  // namespace

void bind_supcon_kernels() {
  ember::supcon_forward_kernel.set_cuda(&supcon_forward_cuda);
  ember::supcon_backward_kernel.set_cuda(&supcon_backward_cuda);
}

}  // namespace ember::cuda
