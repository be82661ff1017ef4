// Launchers of the CUDA kernels behind the neural-network ops (convolution, pooling, linear,
// batch norm, softmax, cross-entropy / NLL, dropout). Plain C++ signatures over device pointers;
// the contracts are those of the CPU kernels (ops/cpu/conv_kernels.h, ops/cpu/nn_kernels.h).
// Op code never calls these directly: nn_register.cpp binds Tensor-level adapters to the
// DeviceKernel stubs of ops/kernels.h, and register_cuda_kernels() (cuda/kernels/register.cpp) calls register_nn_kernels().
//
//   ember::cuda::nn::softmax_forward<float>(outer, n, inner, x, /*log=*/false, y, ember::cuda::Stream{});
//
// Every launcher is instantiated for float and double.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/runtime.h"
#include "ops/activation_rules.h"
#include "ops/conv_geometry.h"

namespace ember::cuda::nn {

// Binds every launcher below to its DeviceKernel stub (nn_register.cpp).
void register_nn_kernels();

// ---- tiled GEMM (nn_gemm.cu) -----------------------------------------------------------------
// C (M, N) = act(alpha * sum_r op(A_r) op(B_r) + beta * C + row_bias[m] + col_bias[n]), row-major with
// leading dims lda, ldb, ldc; op(X) = X^T when trans. Batched over z = outer * inner_count +
// inner (Note [Two-level batch] in nn_gemm.cu); r runs over `reduce_count` products whose
// operands are reduce_a / reduce_b elements apart (summed in registers: deterministic).
template <class T>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  T alpha = T(1);
  const T* a = nullptr;
  int64_t lda = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  T beta = T(0);  // 0: C is only written (never read)
  T* c = nullptr;
  int64_t ldc = 0;
  const T* row_bias = nullptr;  // (M) per batch item, offset by inner * row_bias_inner
  int64_t row_bias_inner = 0;
  const T* col_bias = nullptr;  // (N)
  Activation act = Activation::none;  // applied as each output is stored
  int64_t outer_count = 1, inner_count = 1;
  int64_t a_outer = 0, a_inner = 0, b_outer = 0, b_inner = 0, c_outer = 0, c_inner = 0;
  int64_t reduce_count = 1, reduce_a = 0, reduce_b = 0;
};
template <class T>
void gemm(const GemmArgs<T>& args, Stream stream);

// ---- convolution (nn_conv.cu) ----------------------------------------------------------------
// Column workspace (Note [Conv column chunks] in nn_conv.cu): elements per image (0 for a
// pointwise convolution, which needs none) and images per chunk.
int64_t conv2d_column_elements(const Conv2dGeometry& g);
int64_t conv2d_column_images(const Conv2dGeometry& g, size_t element_size);
// The column workspace budget in bytes (default 128 MiB); tests lower it to exercise chunking.
void set_conv2d_column_budget(int64_t bytes);
// x (N, Cin, H, W), w (Cout, Cin/G, kH, kW), b (Cout) or null -> y (N, Cout, Ho, Wo) = act(conv + b).
// `columns` holds conv2d_column_images(g) * conv2d_column_elements(g) elements (null if 0).
template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, Activation act, T* y, T* columns,
                    Stream stream);
// dy (N, Cout, Ho, Wo), w -> dx (N, Cin, H, W).
template <class T>
void conv2d_input_grad(const Conv2dGeometry& g, const T* dy, const T* w, T* dx, T* columns, Stream stream);
// x, dy -> dw (Cout, Cin/G, kH, kW).
template <class T>
void conv2d_weight_grad(const Conv2dGeometry& g, const T* x, const T* dy, T* dw, T* columns, Stream stream);
// ---- bias + activation backward (nn_bias_activation.cu) ---------------------------------------------
// dy, y (outer, C, inner) -> dz = act'(y) * dy (same shape) and db (C) = dz summed over outer and
// inner (in double). y and dz are null when act is none; db is null when no bias gradient is wanted.
// dz may be dy itself.
template <class T>
void bias_activation_backward(Activation act, int64_t outer, int64_t C, int64_t inner, const T* dy, const T* y,
                              T* dz, T* db, Stream stream);

// ---- pooling (nn_pool.cu); planes = N * C ---------------------------------------------------------
template <class T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int64_t* indices, Stream stream);
template <class T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int64_t* indices, T* dx, Stream stream);
template <class T>
void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const T* x, T* y, Stream stream);
template <class T>
void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const T* dy, T* dx, Stream stream);
// x (planes, H, W) -> y (planes, Ho, Wo) with PyTorch's adaptive windows.
template <class T>
void adaptive_avg_pool2d_forward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, const T* x, T* y,
                                 Stream stream);
template <class T>
void adaptive_avg_pool2d_backward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, const T* dy, T* dx,
                                  Stream stream);

// ---- linear (nn_conv.cu) ---------------------------------------------------------------------------
// x (M, K), w (N, K), b (N) or null -> y (M, N) = act(x w^T + b).
template <class T>
void linear_forward(int64_t M, int64_t K, int64_t N, const T* x, const T* w, const T* b, Activation act, T* y,
                    Stream stream);

// ---- batch norm (nn_norm.cu); x viewed as (N, C, S) -----------------------------------------------
template <class T>
void batch_norm_stats(int64_t N, int64_t C, int64_t S, const T* x, double eps, double momentum, T* mean, T* invstd,
                      T* running_mean, T* running_var, Stream stream);
template <class T>
void batch_norm_apply(int64_t N, int64_t C, int64_t S, const T* x, const T* mean, const T* invstd, const T* weight,
                      const T* bias, Activation act, T* y, Stream stream);
// dx, dweight, dbias may each be null.
// With an activation, grad is the gradient of the activated output y (null for none).
template <class T>
void batch_norm_backward(int64_t N, int64_t C, int64_t S, Activation act, const T* grad, const T* y, const T* x,
                         const T* mean, const T* invstd, const T* weight, bool training, T* dx, T* dweight, T* dbias,
                         Stream stream);

// ---- softmax (nn_softmax.cu); (outer, n, inner) contiguous, over n ---------------------------------
template <class T>
void softmax_forward(int64_t outer, int64_t n, int64_t inner, const T* x, bool log, T* y, Stream stream);
template <class T>
void softmax_backward(int64_t outer, int64_t n, int64_t inner, const T* grad, const T* y, bool log, T* dx,
                      Stream stream);

// ---- cross-entropy and NLL (nn_cross_entropy.cu); logits (N, C, S), target (N, S) ------------------
// `check` (2 device int64): written with {first row whose target is neither in [0, C) nor
// ignore_index, or -1; that target}. The caller reads it back (Note [Target check] there).
template <class T>
void cross_entropy_forward(int64_t N, int64_t C, int64_t S, const T* logits, const int64_t* target, double smoothing,
                           int64_t ignore_index, T* losses, double* lse, T* totals, int64_t* check, Stream stream);
// grad (N, S) at strides (grad_stride_n, grad_stride_s), 0 for a broadcast scalar.
template <class T>
void cross_entropy_backward(int64_t N, int64_t C, int64_t S, const T* grad, int64_t grad_stride_n,
                            int64_t grad_stride_s, const T* logits, const int64_t* target, const double* lse,
                            double smoothing, int64_t ignore_index, T* dlogits, Stream stream);
template <class T>
void nll_loss_forward(int64_t N, int64_t C, int64_t S, const T* log_probs, const int64_t* target, int64_t ignore_index,
                      T* losses, T* totals, int64_t* check, Stream stream);
template <class T>
void nll_loss_backward(int64_t N, int64_t C, int64_t S, const T* grad, int64_t grad_stride_n, int64_t grad_stride_s,
                       const int64_t* target, int64_t ignore_index, T* dlog_probs, Stream stream);

// ---- dropout (nn_dropout.cu) -----------------------------------------------------------------------
// x (n) -> y (n): the keep rule of cpu::dropout with Philox blocks of `seed` from first_block.
template <class T>
void dropout(int64_t n, const T* x, uint64_t seed, uint64_t first_block, double p, T* y, Stream stream);

}  // namespace ember::cuda::nn
