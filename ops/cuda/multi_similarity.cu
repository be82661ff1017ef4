// Multi-Similarity on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h, the CPU's
// ops/cpu/multi_similarity.cpp computes the same in tiles). Note [Pair rows on CUDA] in
// pair_rows.cuh:
//   rows kernel      one block per row i: lp_i over its positives and ln_i over its negatives
//                    (block reductions of OnlineLogSumExp, then the add_one exp(0) merged in);
//   finish kernel    one block: the mean over the rows of lp_i / alpha + ln_i / beta;
//   backward kernel  one block per row: de_i = sum_j (dloss/ds_ij + dloss/ds_ji) e_j.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), y (B) -> stats (B, 2) [lp_i, ln_i] per row.
template <class T>
__global__ void multi_similarity_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E,
                                             const int64_t* __restrict__ y, MultiSimilarityParams p,
                                             double* __restrict__ stats) {
  __shared__ OnlineLogSumExp scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    OnlineLogSumExp pos, neg;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      if (j == i) continue;
      const bool positive = y[j] == y[i];
      (positive ? pos : neg).add(ms_exponent(positive, double(row_dot(E, E, D, i, j)), p));
    }
    OnlineLogSumExp lp{0, 1}, ln{0, 1};  // exp(0): PML's add_one
    lp.merge(block_reduce(pos, scratch, MergeLogSumExp{}));
    ln.merge(block_reduce(neg, scratch, MergeLogSumExp{}));
    if (threadIdx.x == 0) stats[2 * i] = lp.value(), stats[2 * i + 1] = ln.value();
  }
}

// stats -> loss (0-d) = the mean over the B rows (0 when B is 0). One block.
template <class T>
__global__ void multi_similarity_finish_kernel(int64_t B, const double* __restrict__ stats, MultiSimilarityParams p,
                                               T* __restrict__ loss) {
  __shared__ double scratch[32];
  double total = 0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) total += ms_row_loss(stats[2 * i], stats[2 * i + 1], p);
  total = block_reduce(total, scratch, Sum{});
  if (threadIdx.x == 0) loss[0] = B > 0 ? T(total / double(B)) : T(0);
}

// grad (0-d), e, y, stats -> de (B, D).
template <class T>
__global__ void multi_similarity_backward_rows_kernel(int64_t B, int64_t D, const T* __restrict__ grad,
                                                      const T* __restrict__ E, const int64_t* __restrict__ y,
                                                      MultiSimilarityParams p, const double* __restrict__ stats,
                                                      T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  const double scale = double(grad[0]) / double(B);
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    accumulate_weighted_rows(E, D, B, dE + i * D, chunk, [&](int64_t j) -> double {
      if (j == i) return 0;
      const double s = double(row_dot(E, E, D, i, j));
      const bool positive = y[j] == y[i];
      return scale * (ms_weight(positive, s, stats[2 * i], stats[2 * i + 1], p) +
                      ms_weight(positive, s, stats[2 * j], stats[2 * j + 1], p));
    });
  }
}

unsigned row_blocks(int64_t B) { return blocks_for(B, 1); }

void multi_similarity_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& labels,
                                   const MultiSimilarityParams& params, const Tensor& stats, const Tensor& loss) {
  dispatch_float(e.dtype(), "multi_similarity_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B > 0)
      launch<multi_similarity_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, e.data<T>(),
                                              labels.data<int64_t>(), params, stats.data<double>());
    launch<multi_similarity_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, stats.data<double>(), params,
                                              loss.data<T>());
  });
}

void multi_similarity_backward_cuda(const PairTiles&, const Tensor& grad, const Tensor& e, const Tensor& labels,
                                    const MultiSimilarityParams& params, const Tensor& stats, const Tensor& de) {
  dispatch_float(e.dtype(), "multi_similarity_loss_backward", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    launch<multi_similarity_backward_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, grad.data<T>(),
                                                     e.data<T>(), labels.data<int64_t>(), params,
                                                     stats.data<double>(), de.data<T>());
  });
}

}  // namespace

void bind_multi_similarity_kernels() {
  ember::multi_similarity_forward_kernel.set_cuda(&multi_similarity_forward_cuda);
  ember::multi_similarity_backward_kernel.set_cuda(&multi_similarity_backward_cuda);
}

}  // namespace ember::cuda
