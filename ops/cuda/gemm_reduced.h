// What the bf16/f16 GEMM ops on CUDA (matmul.cu, linear.cu, conv.cu) share: the tensor-core
// GEMM over groups of images, the f32 -> 16-bit store with bias and activation, and the widening
// path for GPUs without bf16/f16 mma. Internal to ops/cuda/.
//
//   // y (M, N) bf16 = relu(x w^T + b): f32 accumulation, bias and relu in f32, one rounding
//   Tensor acc = reduced::f32_workspace(M * N, y);
//   gemm_tensor_core(DType::bf16, {1, M, N, K}, {bits(x), K}, {bits(w), K, true}, acc.data<float>());
//   reduced::store_rounded(DType::bf16, acc.data<float>(), M * N, {bits(b), 1, N}, Activation::relu, bits(y));
//
// Note [Reduced-precision GEMMs on CUDA]: the 16-bit operands go to the tensor cores as they
// are, the products accumulate in f32 into an f32 workspace (caching allocator), and one pass
// adds the bias, applies the activation and rounds: the same arithmetic as the CPU's widening
// path (Note [Reduced-precision fallback] in ops/reduced_precision.h) up to the order of the f32
// sums, so the results agree with the CPU's to about one ulp of the 16-bit format. A GPU below
// compute capability 8.0 has no bf16/f16 mma.sync: there, and when a test switches the tensor
// cores off, the kernels widen their operands to f32, run their f32 path and round once.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "ops/activation_rules.h"
#include "ops/cuda/matmul.h"

namespace ember::cuda::reduced {

// Whether gemm_tensor_core runs here: always on the simulator; on a GPU, compute capability 8.0
// or later (and not switched off below).
bool tensor_cores_usable();
// Test hook: false makes the 16-bit GEMM ops take the widening path, as on a GPU below sm_80.
void set_tensor_cores_enabled(bool enabled);

// t's 16-bit elements as raw bits (t bf16 or f16; null when undefined).
const uint16_t* bits(const Tensor& t);
uint16_t* mutable_bits(const Tensor& t);

// An f32 scratch tensor of `numel` elements on like's device, from the caching allocator.
Tensor f32_workspace(int64_t numel, const Tensor& like);

// A contiguous f32 copy of t on its device (no autograd); undefined stays undefined.
Tensor widened_copy(const Tensor& t);

// dst = src32 rounded to dst's dtype (dst contiguous, src32 f32 of its shape).
void store_copy(const Tensor& src32, const Tensor& dst);

// The widening path: f(out32) with out32 an f32 tensor of out's shape, then out = round(out32).
template <class F>
void through_f32(const Tensor& out, F&& f) {
  const Tensor out32 = Tensor::empty(out.shape(), {.dtype = DType::f32, .device = out.device()});
  f(out32);
  store_copy(out32, out);
}

// One GEMM operand per (image i, group g): `op` is the group's matrix with op.batch_stride the
// distance between groups, image_stride the distance between images (0: shared by all images).
struct GroupedOperand {
  GemmOperand<uint16_t> op;
  int64_t image_stride = 0;
};

// c (images, groups, m, n) f32 contiguous = a[i, g] (m, k) @ b[i, g] (k, n), on tensor cores.
void grouped_gemm(DType element, int64_t images, int64_t groups, int64_t m, int64_t n, int64_t k,
                  const GroupedOperand& a, const GroupedOperand& b, float* c, Stream stream = {});

// A bias element per output element i: bias[(i / inner) % period] (linear: inner 1, period N;
// convolution: inner Ho * Wo, period Cout). data null: no bias.
struct BiasLayout {
  const uint16_t* data = nullptr;
  int64_t inner = 1, period = 1;
};

// out (total) 16-bit = round(act(c[i] + bias(i))), c f32; element: bf16 or f16 (out's and the bias's).
void store_rounded(DType element, const float* c, int64_t total, const BiasLayout& bias, Activation act,
                   uint16_t* out, Stream stream = {});

// acc (elements) f32 = [first ? 0 : acc] + sum over i < images of c[i * elements + e], in order of i.
void accumulate_images(const float* c, int64_t images, int64_t elements, bool first, float* acc,
                       Stream stream = {});

}  // namespace ember::cuda::reduced
