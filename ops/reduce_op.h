// The reductions that reduce kernels compute, on every backend.
#pragma once

#include <cstdint>

namespace ember {

enum class ReduceOp : uint8_t { sum, max, min, prod };

}  // namespace ember
