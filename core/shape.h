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

// Note [Checked sizes]: every size ember computes from a shape goes through these, so a shape
// whose element count (or a stride) does not fit in int64 is an Error, never a wrapped count
// that a later kernel writes past. A tensor's numel and nbytes are checked once, when its
// storage is created (Tensor::empty); products of some of its dims are then bounded by them.

// The element count; a negative dim or an overflowing product is an Error naming `op`.
int64_t numel_of(const Shape& shape, const char* op = "numel");
// a * b for non-negative sizes; an overflow is an Error naming `op`.
int64_t checked_size_mul(int64_t a, int64_t b, const char* op);
Strides contiguous_strides(const Shape& shape);

// Maps a possibly negative dim into [0, rank); out of range is an Error naming `op`.
int64_t normalize_dim(int64_t dim, int64_t rank, const char* op);

// NumPy broadcasting of two shapes; incompatible shapes are an Error naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Strides that read a tensor of (shape, strides) as if it had shape `target` (to which it
// must broadcast): broadcast dims get stride 0.
Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target);

}  // namespace ember
