// Row strides that keep a row-major matrix's rows from being a multiple of 4 KiB apart, for
// matrices that a GEMM reads in place as its B (ArcFace's class weights and its blocks of cosines):
//
//   const int64_t ld = padded_row_stride(C, sizeof(float));   // 1,040 for C = 1,024
//   Tensor w = empty_padded_rows(D, C, options);               // (D, C), w.stride(0) == ld
//
// Note [Padded rows]: an L1 indexed by the address bits below 4 KiB (48 KiB, 12 ways: 64 sets of
// 64 B lines) puts rows that are a multiple of 4 KiB apart in the same set, so a micro-kernel that
// reads KC such rows of B in place keeps only 12 of them in L1, and the f32 GEMM packs such a B
// on one thread instead (Note [B in place] in ops/cpu/gemm_packed.cpp: 256x1024x512 and
// 256x4096x256 lost in place). Rounding a row up to whole 64 B lines, and one line more where
// that is a multiple of 4 KiB, spreads the rows over the sets.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/tensor.h"

namespace ember {

inline int64_t padded_row_stride(int64_t n, int64_t element_bytes) {
  const int64_t line = std::max<int64_t>(64 / element_bytes, 1);
  const int64_t ld = (std::max<int64_t>(n, 1) + line - 1) / line * line;
  return ld * element_bytes % 4096 == 0 ? ld + line : ld;
}

// Uninitialised (R, C) from the caching allocator, its rows padded_row_stride(C) apart.
inline Tensor empty_padded_rows(int64_t R, int64_t C, TensorOptions options) {
  const int64_t ld = padded_row_stride(C, int64_t(dtype_size(options.dtype)));
  return Tensor::view_of(Tensor::empty({R * ld}, options), {R, C}, {ld, 1}, 0);
}

}  // namespace ember
