// ProxyAnchor on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h; the CPU's
// ops/cpu/proxy_anchor.cpp computes the same in tiles). Note [Pair rows on CUDA] in pair_rows.cuh:
//   classes kernel   one block per class c, threads over the rows: pos_c and neg_c (block
//                    reductions of OnlineLogSumExp, then PML's add_one 0) and whether c is present;
//   finish kernel    one block: the two sums and their divisors in a fixed order, and the label
//                    check (Note [Label check on CUDA]);
//   gradient         when asked for (Note [Gradient in the forward] in ops/cpu/triplet_tiled.cpp),
//                    at grad 1: cross_similarity_backward, de (a block per row), dp (a block per class).
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), p (C, D), y (B) -> stats (C, 2) [pos_c, neg_c], members (C) rows of class c.
template <class T>
__global__ void proxy_anchor_classes_kernel(int64_t B, int64_t C, int64_t D, const T* __restrict__ E,
                                            const T* __restrict__ P, const int64_t* __restrict__ y, double margin,
                                            double alpha, double* __restrict__ stats, double* __restrict__ members) {
  __shared__ OnlineLogSumExp lse_scratch[32];
  __shared__ double scratch[32];
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    OnlineLogSumExp pos, neg;
    double count = 0;
    for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
      const bool positive = y[i] == c;
      (positive ? pos : neg).add(proxy_anchor_exponent(positive, double(row_dot(E, P, D, i, c)), margin, alpha));
      count += positive ? 1 : 0;
    }
    pos = block_reduce(pos, lse_scratch, MergeLogSumExp{});
    neg = block_reduce(neg, lse_scratch, MergeLogSumExp{});
    count = block_reduce(count, scratch, Sum{});
    if (threadIdx.x == 0) {
      pos.add(0), neg.add(0);  // PML's add_one
      stats[2 * c] = pos.value(), stats[2 * c + 1] = neg.value();
      members[c] = count;
    }
  }
}

// stats, members, y -> loss (0-d), present (0-d); check (2) the first bad label. One block.
template <class T>
__global__ void proxy_anchor_finish_kernel(int64_t B, int64_t C, const int64_t* __restrict__ y,
                                           const double* __restrict__ stats, const double* __restrict__ members,
                                           T* __restrict__ loss, double* __restrict__ present,
                                           int64_t* __restrict__ check) {
  __shared__ double scratch[32];
  __shared__ int64_t index_scratch[32];
  double pos = 0, neg = 0, classes = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    pos += stats[2 * c], neg += stats[2 * c + 1], classes += members[c] > 0 ? 1 : 0;
  pos = block_reduce(pos, scratch, Sum{});
  neg = block_reduce(neg, scratch, Sum{});
  classes = block_reduce(classes, scratch, Sum{});
  find_bad_label(y, B, C, check, index_scratch);
  if (threadIdx.x == 0) {
    present[0] = classes;
    loss[0] = classes > 0 ? T(pos / classes + neg / double(C)) : T(0);
  }
}

// dloss/ds_ic = proxy_anchor_weight(...) (at grad 1), s_ic recomputed.
template <class T>
struct ProxyAnchorWeights {
  int64_t C, D;
  const T* E;
  const T* P;
  const int64_t* y;
  const double* stats;
  const double* present;
  double margin, alpha;
  __device__ double operator()(int64_t i, int64_t c) const {
    const double classes = present[0];
    if (classes == 0) return 0;
    const bool positive = y[i] == c;
    const double s = double(row_dot(E, P, D, i, c));
    return proxy_anchor_weight(positive, s, margin, alpha, stats[2 * c + (positive ? 0 : 1)],
                               positive ? classes : double(C));
  }
};

void proxy_anchor_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& p, const Tensor& labels,
                               double margin, double alpha, const Tensor& stats, const Tensor& present,
                               const Tensor& loss, const Tensor& de, const Tensor& dp) {
  dispatch_float(e.dtype(), "proxy_anchor_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1), C = p.size(0);
    const Tensor members = Tensor::empty({C}, {.dtype = DType::f64, .device = e.device()});
    const Tensor check = Tensor::empty({2}, {.dtype = DType::i64, .device = e.device()});
    launch<proxy_anchor_classes_kernel<T>>(blocks_for(C, 1), kThreads, 0, Stream{}, B, C, D, e.data<T>(),
                                           p.data<T>(), labels.data<int64_t>(), margin, alpha, stats.data<double>(),
                                           members.data<double>());
    launch<proxy_anchor_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, C, labels.data<int64_t>(),
                                          stats.data<double>(), members.data<double>(), loss.data<T>(),
                                          present.data<double>(), check.data<int64_t>());
    throw_on_bad_label(check.data<int64_t>(), C, "proxy_anchor_loss");
    if (!de.defined() && !dp.defined()) return;
    // Both gradients in one pass; one not wanted goes to a temporary (the CPU skips it).
    const Tensor de_out = de.defined() ? de : Tensor::empty(e.shape(), e.options());
    const Tensor dp_out = dp.defined() ? dp : Tensor::empty(p.shape(), p.options());
    const ProxyAnchorWeights<T> weights{C, D, e.data<T>(), p.data<T>(), labels.data<int64_t>(), stats.data<double>(),
                                        present.data<double>(), margin, alpha};
    cross_similarity_backward(B, C, D, e.data<T>(), p.data<T>(), weights, de_out.data<T>(), dp_out.data<T>());
  });
}

}  // namespace

void bind_proxy_anchor_kernels() {
  ember::proxy_anchor_forward_kernel.set_cuda(&proxy_anchor_forward_cuda);
}

}  // namespace ember::cuda
