// The reductions that reduce kernels compute, on every backend.
#pragma once

#include <cstdint>

namespace ember {

// mean: the sum divided by R, in the accumulator, rounded once to the output's type (floating
// types only; PyTorch's mean rounds once too, where sum and a divide would round twice).
enum class ReduceOp : uint8_t { sum, max, min, prod, mean };

}  // namespace ember
