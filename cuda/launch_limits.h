// CUDA's launch limits and the check of a launch's shape against them, shared by
// ember::cuda::launch (cuda/launch.h) and the simulator's `<<<>>>` for unmodified .cu files
// (cuda/sim/dropin.h). Needs dim3: include after the CUDA headers or the simulator's.
//
//   ember::cuda::detail::check_launch_shape("scale_kernel", grid, block, 0);   // throws ember::Error
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ember::cuda {

// CUDA's launch limits (checked by check_launch_shape below; kernels that tile a dimension split their
// launches so as to stay inside them).
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridZ = 65535;

namespace detail {

inline std::string launch_str(std::string_view name, dim3 grid, dim3 block, size_t shared_bytes) {
  return ember::detail::concat("launch of ", name, "<<<(", grid.x, ",", grid.y, ",", grid.z, "), (", block.x, ",",
                               block.y, ",", block.z, "), ", shared_bytes, ">>>");
}

// The limits every CUDA GPU since sm_30 shares, checked before launching in both modes so the
// message says what was expected.
inline void check_launch_shape(std::string_view name, dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  EMBER_CHECK(threads >= 1 && threads <= kMaxThreadsPerBlock, launch_str(name, grid, block, shared_bytes),
              ": expected 1 to ", kMaxThreadsPerBlock, " threads per block, got ", threads);
  EMBER_CHECK(block.x <= 1024 && block.y <= 1024 && block.z <= 64, launch_str(name, grid, block, shared_bytes),
              ": expected a block of at most (1024, 1024, 64), got (", block.x, ",", block.y, ",", block.z, ")");
  EMBER_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= kMaxGridX && grid.y <= kMaxGridY &&
                  grid.z <= kMaxGridZ,
              launch_str(name, grid, block, shared_bytes), ": expected a grid of 1 to (", kMaxGridX, ", ", kMaxGridY,
              ", ", kMaxGridZ, ") blocks, got (", grid.x, ",", grid.y, ",", grid.z, ")");
}

}  // namespace detail
}  // namespace ember::cuda
