#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace ember {

int64_t checked_size_mul(int64_t a, int64_t b, const char* op) {
  int64_t out = 0;
  EMBER_CHECK(!__builtin_mul_overflow(a, b, &out), op, ": the size ", a, " x ", b,
              " overflows 64-bit sizes");
  return out;
}

int64_t numel_of(const Shape& shape, const char* op) {
  for (int64_t d : shape)
    EMBER_CHECK(d >= 0, op, ": sizes must be non-negative, got ", shape_str(shape));
  // An empty tensor has no elements whatever its other dims (and no product to overflow).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    EMBER_CHECK(!__builtin_mul_overflow(n, d, &n), op, ": shape ", shape_str(shape),
                " has more than 2^63 elements");
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s = checked_size_mul(s, std::max<int64_t>(shape[i], 1), "contiguous_strides");
  }
  return strides;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  EMBER_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor of rank ", rank,
              " (expected a dim in [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  Strides out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    out[lead + i] = shape[i] == 1 && target[lead + i] != 1 ? 0 : strides[i];
  return out;
}

}  // namespace ember
