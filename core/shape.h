// Shapes and strides (in elements), and the rules that combine them.
//
//   Shape s = broadcast_shapes({3, 1, 5}, {4, 5}, "add");   // (3, 4, 5)
//   int64_t d = normalize_dim(-1, 3, "sum");                 // 2
#pragma once

#include <cstdint>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Strides contiguous_strides(const Shape& shape);

// Maps a possibly negative dim into [0, rank); out of range is an Error naming `op`.
int64_t normalize_dim(int64_t dim, int64_t rank, const char* op);

// NumPy broadcasting of two shapes; incompatible shapes are an Error naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read a tensor of (shape, strides) as if it had shape `target` (to which it
// must broadcast): broadcast dims get stride 0.
Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target);

}  // namespace ember
