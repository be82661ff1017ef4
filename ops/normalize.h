// Row and column L2 normalisation, as PML normalises embeddings and class weights.
//
//   Tensor e = normalize_rows(embeddings);   // (B, D): rows / max(||row||, 1e-12)
//   Tensor w = normalize_columns(W);         // (D, C): W's columns normalised, rows padded
//   Tensor v = normalize_rows(W.t());        // (C, D) contiguous, the same values as w.t()
#pragma once

#include "core/tensor.h"

namespace ember {

// torch.nn.functional.normalize(x, p=2, dim=1, eps=1e-12) of a 2-D x (any strides, f32/f64,
// bf16/f16 through f32): each row divided by max(its L2 norm, 1e-12), returned contiguous;
// recorded by autograd as one node (Note [Fused row normalisation] in ops/normalize.cpp).
Tensor normalize_rows(const Tensor& x);

// torch.nn.functional.normalize(x, p=2, dim=0, eps=1e-12) of a 2-D x (R, C) (f32/f64, bf16/f16
// through f32), for class weights kept in PML's (D, C) layout: each column divided by max(its L2
// norm, 1e-12). The result's rows are padded, y.stride(0) = padded_row_stride(C) >= C (Note
// [Padded rows] in ops/padded_rows.h: a GEMM reads them in place). One autograd node, as
// normalize_rows; x's gradient comes in the incoming gradient's layout where it reuses that
// gradient's memory (a padded one for ArcFace's W; a leaf's .grad() is then made contiguous).
Tensor normalize_columns(const Tensor& x);

}  // namespace ember
