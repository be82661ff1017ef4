// The linear layer's forward on CUDA: one GEMM (gemm.cu) with the bias as its column bias and
// the activation as its epilogue, as the CPU's linear_forward (ops/cpu/linear.cpp) does; bf16/f16
// on tensor cores, bias and activation applied in f32 before the one rounding (gemm_reduced.h).
#include "core/tensor.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/gemm_reduced.h"
#include "ops/cuda/gemm_tensor_core.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

void linear_forward_cuda(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y);

// x (M, K), w (N, K), b (N) or undefined, bf16/f16 -> y (M, N) = act(x w^T + b).
void linear_forward_reduced(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
  if (!reduced::tensor_cores_usable()) {
    const Tensor x32 = reduced::widened_copy(x), w32 = reduced::widened_copy(w), b32 = reduced::widened_copy(b);
    reduced::through_f32(y, [&](const Tensor& y32) { linear_forward_cuda(x32, w32, b32, act, y32); });
    return;
  }
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  const Tensor acc = reduced::f32_workspace(M * N, y);
  gemm_tensor_core(x.dtype(), {1, M, N, K}, {.data = reduced::bits(x), .ld = K},
                   {.data = reduced::bits(w), .ld = K, .transposed = true}, acc.data<float>());
  reduced::store_rounded(x.dtype(), acc.data<float>(), M * N, {.data = reduced::bits(b), .inner = 1, .period = N}, act,
                         reduced::mutable_bits(y));
}

// x (M, K), w (N, K), b (N) or undefined -> y (M, N) = act(x w^T + b).
void linear_forward_cuda(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
  if (is_reduced_float(x.dtype())) return linear_forward_reduced(x, w, b, act, y);
  dispatch_float(x.dtype(), "linear", [&]<class T>(TypeTag<T>) {
    GemmArgs<T> p;
    p.trans_b = true;  // w (N, K) read as its transpose
    p.M = x.size(0), p.N = w.size(0), p.K = x.size(1);
    p.a = x.data<T>(), p.lda = p.K, p.b = w.data<T>(), p.ldb = p.K, p.c = y.data<T>(), p.ldc = p.N;
    p.col_bias = data_or_null<T>(b);
    p.act = act;
    gemm(p, Stream{});
  });
}

}  // namespace

void bind_linear_kernels() { ember::linear_forward_kernel.set_cuda(&linear_forward_cuda); }

}  // namespace ember::cuda
