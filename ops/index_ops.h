// Indexing with integer (i64) index tensors.
//
//   Tensor rows = index_select(table, 0, ids);          // embedding lookup
//   Tensor picked = gather(logits, 1, labels.unsqueeze(1));
//   Tensor counts = scatter_add(zeros({10}), 0, labels, ones({n}));
#pragma once

#include "core/tensor.h"

namespace ember {

// x's slices along dim at the positions in index (1-D i64).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = x with src's slices added at index along dim (the backward of index_select).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out[i][j] = x[i][index[i][j]] (dim 1), etc.; index has x's rank, out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x with src[i][j] added at out[i][index[i][j]] (dim 1), etc.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// (...) i64 class ids -> (..., classes) with a 1 at each id; dtype i64 unless given.
Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype = DType::i64);

}  // namespace ember
