// Views and shape changes. Views share storage with their input; every one is differentiable.
//
//   Tensor y = x.reshape({2, -1}).transpose(0, 1);
//   Tensor parts = cat({a, b}, /*dim=*/0);
//   auto [head, tail] = std::pair{x.narrow(0, 0, 1), x.narrow(0, 1, x.size(0) - 1)};
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1
Tensor view(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Dims& order);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& x);               // all size-1 dims
Tensor squeeze(const Tensor& x, int64_t dim);  // no-op when that dim is not 1
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a dim
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Pieces of `size` along dim (the last may be smaller) / `chunks` nearly equal pieces.
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace ember
