// Row L2 normalisation, as PML normalises embeddings and class weights.
//
//   Tensor e = normalize_rows(embeddings);   // (B, D): rows / max(||row||, 1e-12)
//   Tensor w = normalize_rows(W.t());        // (C, D) contiguous, from W (D, C)'s columns
#pragma once

#include "core/tensor.h"

namespace ember {

// torch.nn.functional.normalize(x, p=2, dim=1, eps=1e-12) of a 2-D x (any strides, f32/f64,
// bf16/f16 through f32): each row divided by max(its L2 norm, 1e-12), returned contiguous;
// recorded by autograd as one node (Note [Fused row normalisation] in ops/normalize.cpp).
Tensor normalize_rows(const Tensor& x);

}  // namespace ember
