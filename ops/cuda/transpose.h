// The tiled transpose behind cuda::copy (ops/cuda/transpose.cu), for copy's own use.
//
//   const auto L = make_layout(dst, {&src});
//   if (!copy_transposed(L, dst.dtype(), src.dtype())) launch_elementwise<...>(L, ...);
#pragma once

#include "core/dtype.h"
#include "ops/elementwise_layout.h"

namespace ember::cuda {

// Runs the copy of a 2-layout (dst, src) as a tiled transpose through shared memory when it is
// one: after coalescing, (M, N) or (B, M, N) with dst unit-stride along N and src unit-stride
// along M (a transposed or permuted view, e.g. x.t().contiguous()). Returns false (and does
// nothing) for any other layout.
bool copy_transposed(const ElementwiseLayout& L, DType dst_dtype, DType src_dtype);

}  // namespace ember::cuda
