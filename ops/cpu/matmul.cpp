// bmm on the CPU: each batch item is one call of the GEMM (ops/cpu/gemm_typed.h), operands read
// in place row- or column-major; the batch is split across threads when it has enough items.
// bf16 operands are read as bf16 and accumulated in f32, rounded once (Note [Native bf16 GEMM
// ops] in ops/cpu/gemm_typed.h).
#include "core/parallel.h"
#include "ops/cpu/gemm_typed.h"
#include "ops/kernels.h"

namespace ember::cpu {

// a: (B, M, K), b: (B, K, N) -> out: (B, M, N) contiguous, all of one dtype (f32, f64, bf16).
void bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_gemm(a.dtype(), "matmul", [&]<class T>(TypeTag<T>) {
    const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
    // The op layer guarantees each operand is row-major (unit column stride, row stride >= cols)
    // or column-major (unit row stride, column stride >= rows) within a batch.
    auto layout = [](const Tensor& t, int64_t cols, bool& trans, int64_t& ld) {
      trans = !(t.stride(2) == 1 && t.stride(1) >= cols);
      ld = trans ? t.stride(2) : t.stride(1);
    };
    bool ta, tb;
    int64_t lda, ldb;
    layout(a, K, ta, lda);
    layout(b, N, tb, ldb);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const AccumulatorFor<T> acc(out);
    acc_t<T>* pc = acc.data();
    const int64_t sa = a.stride(0), sb = b.stride(0);
    auto one = [&](int64_t i) {
      gemm_typed<T>(ta, tb, M, N, K, pa + i * sa, lda, pb + i * sb, ldb, acc_t<T>(0), pc + i * M * N, N);
    };
    if (B >= num_threads() && B > 1) {
      parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) { for (int64_t i = b0; i < b1; ++i) one(i); });
    } else {
      for (int64_t i = 0; i < B; ++i) one(i);
    }
    acc.store(out);
  });
}

}  // namespace ember::cpu
