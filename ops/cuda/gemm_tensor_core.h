// c (batch, m, n) f32 = a (batch, m, k) @ b (batch, k, n), a and b bf16 or f16: the
// tensor-core GEMM (mma.sync m16n8k16, f32 accumulation; cuda/mma.h). Plain C++: device
// pointers in, no CUDA headers needed to call it. The operands are the 16-bit elements' raw
// bits, in GemmOperand's layouts (ops/cuda/matmul.h: row-major or transposed, leading
// dimension, batch stride, 0 to broadcast).
//
//   // c (100, 37) = a (100, 70) @ b (70, 37), bf16 row-major operands
//   using namespace ember::cuda;
//   const GemmShape shape{.batch = 1, .m = 100, .n = 37, .k = 70};
//   gemm_tensor_core(DType::bf16, shape, {.data = a_dev, .ld = 70}, {.data = b_dev, .ld = 37}, c_dev);
//
// Any sizes (the edges are padded with zeros); k == 0 writes zeros. Needs compute capability
// 8.0 or later on a GPU; the simulator runs it anywhere. The SIMT kernels (matmul.h) remain the
// f32 path and the fallback.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "cuda/runtime.h"
#include "ops/cuda/matmul.h"

namespace ember::cuda {

// element: DType::bf16 or DType::f16 (a and b alike); c is contiguous (batch, m, n) f32.
void gemm_tensor_core(DType element, const GemmShape& shape, const GemmOperand<uint16_t>& a,
                      const GemmOperand<uint16_t>& b, float* c, Stream stream = {});

}  // namespace ember::cuda
