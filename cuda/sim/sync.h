// Block and warp synchronisation for kernels under the SIMT simulator: __syncthreads, warp
// shuffles, votes and __syncwarp, with CUDA's signatures. Each also records its source
// location so a misuse is reported where it happens.
//
//   for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
#pragma once

#include <cstring>
#include <source_location>
#include <type_traits>

#include "cuda/sim/executor.h"

inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ember::sim::syncthreads(where);
}

inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location where = std::source_location::current()) {
  ember::sim::warp_collective(ember::sim::WarpOp::sync, mask, 0, 0, warpSize, where);
}

inline unsigned __activemask() { return ember::sim::warp_lanes(); }  // Note [__activemask] in executor.h

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  return unsigned(ember::sim::warp_collective(ember::sim::WarpOp::ballot, mask, predicate != 0, 0, warpSize, where));
}

inline int __any_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) != 0;
}

inline int __all_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  return __ballot_sync(mask, predicate, where) == mask;  // every lane of mask takes part
}

namespace ember::sim {
template <class T>
T shuffle(WarpOp op, unsigned mask, T value, int arg, int width, const std::source_location& where) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_collective(op, mask, bits, arg, width, where);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace ember::sim

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location where = std::source_location::current()) {
  return ember::sim::shuffle(ember::sim::WarpOp::shfl_idx, mask, var, src_lane, width, where);
}

template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                 std::source_location where = std::source_location::current()) {
  return ember::sim::shuffle(ember::sim::WarpOp::shfl_up, mask, var, int(delta), width, where);
}

template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                   std::source_location where = std::source_location::current()) {
  return ember::sim::shuffle(ember::sim::WarpOp::shfl_down, mask, var, int(delta), width, where);
}

template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location where = std::source_location::current()) {
  return ember::sim::shuffle(ember::sim::WarpOp::shfl_xor, mask, var, lane_mask, width, where);
}
