// ArcFace on CUDA (contract in ops/kernels.h, rules in ops/metric_rules.h; the CPU's
// ops/cpu/arcface.cpp computes the same in tiles). Note [Pair rows on CUDA] in pair_rows.cuh:
//   rows kernel      one block per row i, threads over the classes: lse_i of the logits (a block
//                    reduction of OnlineLogSumExp) and the row's loss lse_i - x_iy;
//   finish kernel    one block: the mean over rows in a fixed order, and the label check
//                    (Note [Label check on CUDA]);
//   gradient         when asked for (Note [Gradient in the forward] in ops/cpu/triplet_tiled.cpp),
//                    at grad 1: cross_similarity_backward, de (a block per row), dw (a block per class).
#include "core/tensor.h"
#include "cuda/launch.h"
#include "ops/cuda/pair_rows.cuh"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

constexpr unsigned kThreads = 128;

// e (B, D), w (C, D) (class rows: Note [Class rows on CUDA]), y (B) -> stats (B) lse_i,
// rows (B) lse_i - x_iy (NaN for a bad label).
template <class T>
__global__ void arcface_rows_kernel(int64_t B, int64_t C, int64_t D, const T* __restrict__ E, const T* __restrict__ W,
                                    const int64_t* __restrict__ y, double margin, double scale,
                                    double* __restrict__ stats, double* __restrict__ rows) {
  __shared__ OnlineLogSumExp lse_scratch[32];
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < B; i += gridDim.x) {
    const int64_t target = y[i];
    OnlineLogSumExp logits;
    double x_target = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double x = arcface_logit(c == target, double(row_dot(E, W, D, i, c)), margin, scale);
      logits.add(x);
      if (c == target) x_target = x;
    }
    const double lse = block_reduce(logits, lse_scratch, MergeLogSumExp{}).value();
    x_target = block_reduce(x_target, scratch, Sum{});
    if (threadIdx.x == 0) {
      stats[i] = lse;
      rows[i] = target >= 0 && target < C ? lse - x_target : NAN;
    }
  }
}

// rows (B), y (B) -> loss (0-d) = the mean of rows (0 for B = 0), check (2) the first bad label.
// One block.
template <class T>
__global__ void arcface_finish_kernel(int64_t B, int64_t C, const int64_t* __restrict__ y,
                                      const double* __restrict__ rows, T* __restrict__ loss,
                                      int64_t* __restrict__ check) {
  __shared__ double scratch[32];
  __shared__ int64_t index_scratch[32];
  double total = 0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) total += rows[i];
  total = block_reduce(total, scratch, Sum{});
  find_bad_label(y, B, C, check, index_scratch);
  if (threadIdx.x == 0) loss[0] = B > 0 ? T(total / double(B)) : T(0);
}

// dloss/dc_ic = arcface_weight(...) / B (at grad 1), c_ic recomputed.
template <class T>
struct ArcFaceWeights {
  int64_t B, D;
  const T* E;
  const T* W;
  const int64_t* y;
  const double* lse;
  double margin, scale;
  __device__ double operator()(int64_t i, int64_t c) const {
    const double s = double(row_dot(E, W, D, i, c));
    return arcface_weight(c == y[i], s, margin, scale, lse[i]) / double(B);
  }
};

// Note [Class rows on CUDA]: the kernels read a class's weights as a row (C, D), so the class
// weights in PML's (D, C) layout (Note [Class weights as columns] in ops/cpu/cross_operand.h) are
// transposed into rows first and dw back after: two device copies of C D values, against the
// kernels' O(B C D).
void arcface_forward_cuda(const PairTiles&, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                          double scale, const Tensor& stats, const Tensor& loss, const Tensor& de, const Tensor& dw) {
  const Tensor w_rows = w.detach().t().contiguous();  // a kernel's temporary: nothing to record
  dispatch_float(e.dtype(), "arcface_loss", [&]<class T>(TypeTag<T>) {
    const int64_t B = e.size(0), D = e.size(1), C = w_rows.size(0);
    const Tensor rows = Tensor::empty({B}, {.dtype = DType::f64, .device = e.device()});
    const Tensor check = Tensor::empty({2}, {.dtype = DType::i64, .device = e.device()});
    if (B > 0)
      launch<arcface_rows_kernel<T>>(blocks_for(B, 1), kThreads, 0, Stream{}, B, C, D, e.data<T>(), w_rows.data<T>(),
                                     labels.data<int64_t>(), margin, scale, stats.data<double>(), rows.data<double>());
    launch<arcface_finish_kernel<T>>(1, kThreads, 0, Stream{}, B, C, labels.data<int64_t>(), rows.data<double>(),
                                     loss.data<T>(), check.data<int64_t>());
    throw_on_bad_label(check.data<int64_t>(), C, "arcface_loss");
    if (!de.defined() && !dw.defined()) return;
    // Both gradients in one pass; one not wanted goes to a temporary (the CPU skips it).
    const Tensor de_out = de.defined() ? de : Tensor::empty(e.shape(), e.options());
    const Tensor dw_rows = Tensor::empty(w_rows.shape(), w_rows.options());
    const ArcFaceWeights<T> weights{B, D, e.data<T>(), w_rows.data<T>(), labels.data<int64_t>(), stats.data<double>(),
                                    margin, scale};
    cross_similarity_backward(B, C, D, e.data<T>(), w_rows.data<T>(), weights, de_out.data<T>(), dw_rows.data<T>());
    if (dw.defined()) Tensor(dw).copy_(dw_rows.t());
  });
}

}  // namespace

void bind_arcface_kernels() {
  ember::arcface_forward_kernel.set_cuda(&arcface_forward_cuda);
}

}  // namespace ember::cuda
