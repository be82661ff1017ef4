#include "core/shape.h"

#include "core/error.h"

namespace ember {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
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
