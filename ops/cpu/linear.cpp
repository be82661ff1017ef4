// The linear layer's forward on the CPU: one GEMM whose epilogue adds the bias and applies the
// activation while each tile is in registers. bf16 operands are read as bf16 and accumulated in
// f32, rounded once (Note [Native bf16 GEMM ops] in ops/cpu/gemm_typed.h).
#include "ops/cpu/gemm_typed.h"
#include "ops/kernels.h"

namespace ember::cpu {

// x: (M, K), w: (N, K), b: (N) or undefined -> y: (M, N) = act(x w^T + b), all contiguous and of
// one dtype (f32, f64, bf16).
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
  dispatch_gemm(x.dtype(), "linear", [&]<class T>(TypeTag<T>) {
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    const AccumulatorFor<T> acc(y);
    const BiasFor<T> bias(b);
    // y (M, N) = x (M, K) @ w^T, w read as the transpose of the row-major (N, K) weight.
    gemm_typed<T>(false, true, M, N, K, x.data<T>(), K, w.data<T>(), K, acc_t<T>(0), acc.data(), N, act,
                  {nullptr, bias.data()});
    acc.store(y);
  });
}

}  // namespace ember::cpu
