// How ops whose kernels compute in f32 or f64 only take bf16 and f16 tensors.
//
//   Tensor softmax(const Tensor& x, int64_t dim) {
//     if (is_reduced_float(x.dtype())) return narrowed(softmax(widened(x), dim), x.dtype());
//     ...
//
// Note [Reduced-precision fallback]: widening bf16/f16 to f32 is exact, so an op that widens its
// inputs, computes in f32 and rounds its result once returns what PyTorch's bf16/f16 kernels
// return for softmax, normalisation, pooling and the losses, which accumulate in f32 and round
// once (Note [Reduced-precision arithmetic] in core/float16.h). Both conversions are ordinary
// .to() ops, so autograd differentiates through them and the gradient reaching a bf16 input is
// bf16. The cost is two extra passes over the data; elementwise ops, reductions and copies have
// native 16-bit kernels instead, and the GEMMs (matmul, linear, convolution) read bf16 directly.
#pragma once

#include "core/tensor.h"

namespace ember {

// x in f32 when it is bf16 or f16, else x itself (an undefined tensor stays undefined).
inline Tensor widened(const Tensor& x) {
  return x.defined() && is_reduced_float(x.dtype()) ? x.to(DType::f32) : x;
}

// y rounded to `dtype` when that is bf16 or f16 and y is floating, else y itself.
inline Tensor narrowed(const Tensor& y, DType dtype) {
  return y.defined() && is_reduced_float(dtype) && is_floating(y.dtype()) && y.dtype() != dtype ? y.to(dtype) : y;
}

// Whether the GEMM ops (matmul, linear, conv2d and its gradients) have a native kernel for x's
// 16-bit dtype: bf16 on the CPU (Note [Native bf16 GEMM ops] in ops/cpu/gemm_typed.h), bf16 and
// f16 on cuda (tensor cores: Note [Reduced-precision GEMMs on CUDA] in ops/cuda/gemm_reduced.h).
// f16 on the CPU (no f16 dot product on these CPUs) takes the fallback above.
inline bool native_reduced_gemm(const Tensor& x) { return x.device().is_cuda() || x.dtype() == DType::bf16; }

}  // namespace ember
