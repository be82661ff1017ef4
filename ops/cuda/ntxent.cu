// NT-Xent on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h, the CPU's
// ops/cpu/ntxent.cpp computes the same in tiles). Note [Pair rows on CUDA] in pair_rows.cuh:
//   rows kernel      one block per anchor i: lse_i over its negatives (a block reduction of
//                    OnlineLogSumExp), then its positive pairs' losses and dz;
//   finish kernel    one block: the mean over positive pairs, in a fixed order;
//   backward kernel  one block per anchor: de_i = sum_j (dloss/ds_ij + dloss/ds_ji) e_j.
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), y (B) -> stats (B, 2) [lse_i, G_i], rows (B, 2) [loss sum, positive pairs] per anchor.
template <class T>
__global__ void ntxent_rows_kernel(int64_t B, int64_t D, const T* __restrict__ E, const int64_t* __restrict__ y,
                                   double inv_t, double small, double* __restrict__ stats,
                                   double* __restrict__ rows) {
  __shared__ OnlineLogSumExp lse_scratch[32];
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    OnlineLogSumExp negatives;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x)
      if (y[j] != y[i]) negatives.add(double(row_dot(E, E, D, i, j)) * inv_t);
    const double lse = block_reduce(negatives, lse_scratch, MergeLogSumExp{}).value();
    double loss = 0, dz = 0, count = 0;
    for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
      if (j == i || y[j] != y[i]) continue;
      const NTXentPair p = ntxent_pair(double(row_dot(E, E, D, i, j)) * inv_t - lse, small);
      loss += p.loss, dz += p.dz, count += 1;
    }
    loss = block_reduce(loss, scratch, Sum{});
    dz = block_reduce(dz, scratch, Sum{});
    count = block_reduce(count, scratch, Sum{});
    if (threadIdx.x == 0) {
      stats[2 * i] = lse, stats[2 * i + 1] = dz;
      rows[2 * i] = loss, rows[2 * i + 1] = count;
    }
  }
}

// rows, stats -> loss (0-d) = sum / positives, pairs (0-d) = positives; poison and 0 without a
// positive or a negative pair. One block.
template <class T>
__global__ void ntxent_finish_kernel(int64_t B, const double* __restrict__ stats, const double* __restrict__ rows,
                                     const T* __restrict__ poison, T* __restrict__ loss, double* __restrict__ pairs) {
  __shared__ double scratch[32];
  double total = 0, positives = 0, negatives = 0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
    total += rows[2 * i], positives += rows[2 * i + 1];
    negatives += stats[2 * i] != -INFINITY ? 1 : 0;
  }
  total = block_reduce(total, scratch, Sum{});
  positives = block_reduce(positives, scratch, Sum{});
  negatives = block_reduce(negatives, scratch, Sum{});
  if (threadIdx.x == 0) {
    const bool defined = positives > 0 && negatives > 0;
    loss[0] = defined ? T(total / positives) : poison[0];  // Note [Non-finite embeddings]
    pairs[0] = defined ? positives : 0;
  }
}

// grad (0-d), e, y, stats, pairs -> de (B, D).
template <class T>
__global__ void ntxent_backward_rows_kernel(int64_t B, int64_t D, const T* __restrict__ grad,
                                            const T* __restrict__ E, const int64_t* __restrict__ y, double inv_t,
                                            double small, const double* __restrict__ stats,
                                            const double* __restrict__ pairs, T* __restrict__ dE) {
  __shared__ T chunk[kThreads];
  const double P = pairs[0];
  const double scale = P == 0 ? 0 : double(grad[0]) * inv_t / P;
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    accumulate_weighted_rows(E, D, P == 0 ? 0 : B, dE + i * D, chunk, [&](int64_t j) -> double {
      if (j == i) return 0;
      const double s = double(row_dot(E, E, D, i, j)) * inv_t;
      const bool positive = y[j] == y[i];
      return scale * (ntxent_weight(positive, s, stats[2 * i], stats[2 * i + 1], small) +
                      ntxent_weight(positive, s, stats[2 * j], stats[2 * j + 1], small));
    });
  }
}

unsigned row_blocks(int64_t B) { return blocks_for(B, 1); }

void ntxent_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& labels, double temperature,
                         const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& pairs) {
  dispatch_float(e.dtype(), "ntxent_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    const Tensor rows = Tensor::empty({B, 2}, {.dtype = DType::f64, .device = e.device()});
    if (B > 0)
      launch<ntxent_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, e.data<T>(), labels.data<int64_t>(),
                                    1.0 / temperature, small_val<T>(), stats.data<double>(), rows.data<double>());
    launch<ntxent_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, stats.data<double>(), rows.data<double>(),
                                    poison.data<T>(), loss.data<T>(), pairs.data<double>());
  });
}

void ntxent_backward_cuda(const PairTiles&, const Tensor& grad, const Tensor& e, const Tensor& labels,
                          double temperature, const Tensor& stats, const Tensor& pairs, const Tensor& de) {
  dispatch_float(e.dtype(), "ntxent_loss_backward", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1);
    if (B == 0) return;
    launch<ntxent_backward_rows_kernel<T>>(row_blocks(B), kThreads, 0, Stream{}, B, D, grad.data<T>(), e.data<T>(),
                                           labels.data<int64_t>(), 1.0 / temperature, small_val<T>(),
                                           stats.data<double>(), pairs.data<double>(), de.data<T>());
  });
}

}  // namespace

void bind_ntxent_kernels() {
  ember::ntxent_forward_kernel.set_cuda(&ntxent_forward_cuda);
  ember::ntxent_backward_kernel.set_cuda(&ntxent_backward_cuda);
}

}  // namespace ember::cuda
