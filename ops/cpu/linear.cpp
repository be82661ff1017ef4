// The linear layer's forward on the CPU: one GEMM whose initial C is the broadcast bias and whose
// epilogue is the activation.
#include <algorithm>

#include "core/parallel.h"
#include "ops/kernels.h"
#include "ops/cpu/gemm.h"

namespace ember::cpu {

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y) {
  dispatch_float(x.dtype(), "linear", [&]<class T>(TypeTag<T>) {
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    T* yp = y.data<T>();
    if (b.defined()) {
      const T* bp = b.data<T>();
      parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) std::copy(bp, bp + N, yp + r * N);
      });
    }
    // y (M, N) = x (M, K) @ w^T, w read as the transpose of the row-major (N, K) weight.
    gemm<T>(false, true, M, N, K, T(1), x.data<T>(), K, w.data<T>(), K, b.defined() ? T(1) : T(0), yp, N,
            act);
  });
}

}  // namespace ember::cpu
