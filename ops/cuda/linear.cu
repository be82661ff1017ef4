// The linear layer's forward on CUDA: one GEMM (gemm.cu) with the bias as its column bias and
// the activation as its epilogue, as the CPU's linear_forward (ops/cpu/linear.cpp) does.
#include "core/tensor.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/register.h"
#include "ops/kernels.h"

namespace ember::cuda {
namespace {

// x (M, K), w (N, K), b (N) or undefined -> y (M, N) = act(x w^T + b).
void linear_forward_cuda(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
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
