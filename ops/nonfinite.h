// Finding NaN and infinite values in a tensor, on its device: what anomaly mode checks after
// every recorded op and every gradient (Note [Anomaly mode] in autograd/anomaly_mode.cpp).
//
//   NonfiniteCount c = find_nonfinite(y);        // one device synchronisation
//   if (c.any()) std::cerr << describe_nonfinite(y) << "\n";
//   // "NaN at element 17 of (8, 32, 14, 14) (3 NaN, 0 Inf among 6272 elements)"
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember {

struct NonfiniteCount {
  int64_t nan = 0, inf = 0;
  int64_t first = -1;  // flat (row-major) index of the first non-finite element, -1 when none
  bool any() const { return nan + inf > 0; }
};

// Counts t's NaN and infinite elements with the count_nonfinite kernel on t's device and reads
// the three numbers back (the synchronisation). Integer and bool tensors have none; f16/bf16
// (storage dtypes) are widened to f32 first; t need not be contiguous (it is copied if it is not).
NonfiniteCount find_nonfinite(const Tensor& t);

// "" when t is finite; otherwise "NaN at element 17 of (8, 32, 14, 14) (3 NaN, 0 Inf among
// 6272 elements)" ("-Inf at element ..." when the first is infinite).
std::string describe_nonfinite(const Tensor& t);

}  // namespace ember
