// One GEMM call for the element types the CPU's GEMM ops run natively (f32, f64, bf16), so that
// matmul, linear and convolution write each algorithm once, templated on T:
//   C (M, N) acc_t<T> = act(op(A) op(B) + beta C + bias),  A, B of type T, C in acc_t<T>,
// with trans / ld as in cpu::gemm (ops/cpu/gemm.h). For f32 and f64, acc_t<T> is T and C may be
// the op's output itself; for bf16 the operands are read as bf16 by cpu::gemm_bf16 and C is an
// f32 buffer that the caller rounds into the bf16 output once (Note [Native bf16 GEMM ops]).
//
//   dispatch_gemm(x.dtype(), "linear", [&]<class T>(TypeTag<T>) {
//     AccumulatorFor<T> acc(y);                       // y itself, or an f32 temporary
//     gemm_typed<T>(false, true, M, N, K, x.data<T>(), K, w.data<T>(), K, 0, acc.data(), N);
//     acc.store(y);                                   // rounds once when T is bf16
//   });
//
// Note [Native bf16 GEMM ops]: PyTorch's CPU bf16 matmul and convolution read bf16 operands,
// accumulate in f32 and round the result once; so do these. Products of bf16 values are exact in
// f32, so the result is the f32 GEMM's on the widened operands up to the order of the f32 sums,
// and it costs half the operand traffic of widening first (one pass less, and bf16 panels). f16
// is not here: this CPU has no f16 dot product (AVX512-FP16 is a later extension), so an f16
// GEMM would widen while packing and gain nothing over the op layer's f32 fallback, which it
// keeps (Note [Reduced-precision fallback] in ops/reduced_precision.h). Accumulating over several
// GEMMs (convolution's weight gradient over images, col2im over kernel taps) also happens in f32,
// rounding only the final sum.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_bf16.h"

namespace ember::cpu {

// The type a GEMM on T operands accumulates and writes C in.
template <class T>
using acc_t = compute_t<T>;

template <class T>
inline constexpr bool is_bf16_v = std::is_same_v<T, BFloat16>;

// Calls f(TypeTag<T>{}) for the dtypes the CPU GEMM ops run natively: f32, f64, bf16.
template <class F>
decltype(auto) dispatch_gemm(DType dtype, const char* op, F&& f) {
  if (dtype == DType::bf16) return f(TypeTag<BFloat16>{});
  EMBER_CHECK(dtype != DType::f16, op, ": f16 has no native CPU GEMM (the op layer widens it to f32)");
  return dispatch_float(dtype, op, std::forward<F>(f));
}

inline const uint16_t* bf16_bits(const BFloat16* p) {
  static_assert(sizeof(BFloat16) == 2 && std::is_standard_layout_v<BFloat16>);
  return reinterpret_cast<const uint16_t*>(p);
}

template <class T>
void gemm_typed(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                int64_t ldb, acc_t<T> beta, acc_t<T>* C, int64_t ldc, Activation act = Activation::none,
                GemmBias<acc_t<T>> bias = {}) {
  if constexpr (is_bf16_v<T>)
    gemm_bf16(M, N, K, 1.0f, gemm_operand(bf16_bits(A), lda, trans_a), gemm_operand(bf16_bits(B), ldb, trans_b), beta,
              C, ldc, act, bias);
  else
    gemm<T>(trans_a, trans_b, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc, act, bias);
}

// dst[i] = T(src[i]) for i < n: the single rounding of an f32 result (a copy when the types match).
template <class T>
  requires(!std::is_same_v<T, Half>)
void store_rounded(const acc_t<T>* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    if (src != dst) std::copy(src, src + n, dst);
  } else {
    // On the bit patterns: a loop from float to uint16_t vectorises, one storing Float16 structs
    // stayed scalar (as in ops/cpu/bias_activation.cpp).
    uint16_t* bits = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) bits[i] = float_to_bfloat16_bits(src[i]);
  }
}

// The same over threads, for whole outputs.
template <class T>
void store_rounded_parallel(const acc_t<T>* src, T* dst, int64_t n) {
  if (static_cast<const void*>(src) == static_cast<const void*>(dst)) return;
  parallel_for(0, n, int64_t(1) << 15, [&](int64_t b, int64_t e) { store_rounded<T>(src + b, dst + b, e - b); });
}

// Where the GEMMs of an op whose (contiguous) output is `out` write: `out` itself when T is its
// own accumulator type, else an f32 temporary from the caching allocator that store() rounds
// into `out`.
template <class T>
class AccumulatorFor {
 public:
  explicit AccumulatorFor(const Tensor& out) {
    if constexpr (is_bf16_v<T>) {
      buffer_ = Tensor::empty({out.numel()}, {.dtype = DType::f32});
      data_ = buffer_.data<float>();
    } else {
      data_ = out.data<T>();
    }
  }
  acc_t<T>* data() const { return data_; }
  void store(const Tensor& out) const { store_rounded_parallel<T>(data_, out.data<T>(), out.numel()); }

 private:
  Tensor buffer_;
  acc_t<T>* data_ = nullptr;
};

// A bias of type T as acc_t<T> values: the tensor's own data, or (bf16) a converted f32 copy.
template <class T>
class BiasFor {
 public:
  explicit BiasFor(const Tensor& b) {
    if (!b.defined()) return;
    if constexpr (is_bf16_v<T>) {
      converted_ = Tensor::empty({b.numel()}, {.dtype = DType::f32});  // a kernel records no autograd
      float* f = converted_.data<float>();
      const BFloat16* src = b.data<BFloat16>();  // contiguous (the op layer's contract)
      for (int64_t i = 0; i < b.numel(); ++i) f[i] = float(src[i]);
      data_ = f;
    } else {
      data_ = b.data<T>();
    }
  }
  const acc_t<T>* data() const { return data_; }

 private:
  Tensor converted_;
  const acc_t<T>* data_ = nullptr;
};

}  // namespace ember::cpu
