// Matrix products.
//
//   Tensor c = matmul(a, b);   // (n, k) @ (k, m) -> (n, m); 1-D, 2-D and batched with broadcast
#pragma once

#include "core/tensor.h"

namespace ember {

// PyTorch's matmul rules: 1-D @ 1-D is a dot product (0-d); a 1-D operand on the left (right)
// becomes a row (column) and that dim is removed from the result; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ember
