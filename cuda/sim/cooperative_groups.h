// The block- and warp-level part of CUDA's cooperative groups for the SIMT simulator, on top of
// its __syncthreads and warp operations: this_thread_block(), tiled_partition<N>() (N a power
// of two up to 32), their sync/rank/size and shuffles, and cg::reduce with cg::plus/less/greater.
// Grid groups, coalesced_threads() and run-time-sized partitions are not here.
//
//   namespace cg = cooperative_groups;
//   cg::thread_block block = cg::this_thread_block();
//   cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
//   float sum = cg::reduce(warp, x, cg::plus<float>());
//   block.sync();
#pragma once

#include <source_location>

#include "cuda/sim/builtins.h"
#include "cuda/sim/sync.h"

namespace cooperative_groups {

class thread_block {
 public:
  void sync(std::source_location where = std::source_location::current()) const { __syncthreads(where); }
  unsigned long long thread_rank() const {
    return threadIdx.x + blockDim.x * (threadIdx.y + (unsigned long long)blockDim.y * threadIdx.z);
  }
  unsigned long long size() const { return num_threads(); }
  unsigned long long num_threads() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
  dim3 group_index() const { return blockIdx; }
  dim3 thread_index() const { return threadIdx; }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block& g) { g.sync(); }

// Note [tile masks]: a tile is the Size lanes of the warp that share lane / Size; its warp
// operations use those lanes of the warp that exist (so the last, partial warp of a block works
// as on a GPU; Note [__activemask] in executor.h), and shuffle with width Size.
template <unsigned Size>
class thread_block_tile {
  static_assert(Size >= 1 && Size <= 32 && (Size & (Size - 1)) == 0, "tiled_partition: Size must be 1, 2, 4, 8, 16 or 32");

 public:
  unsigned long long thread_rank() const { return rank() % Size; }
  unsigned long long size() const { return Size; }
  unsigned long long num_threads() const { return Size; }
  unsigned long long meta_group_rank() const { return rank() / Size; }
  unsigned long long meta_group_size() const {
    return (this_thread_block().num_threads() + Size - 1) / Size;
  }
  void sync(std::source_location where = std::source_location::current()) const { __syncwarp(mask(), where); }

  template <class T>
  T shfl(T var, int src_rank, std::source_location where = std::source_location::current()) const {
    return __shfl_sync(mask(), var, src_rank, Size, where);
  }
  template <class T>
  T shfl_down(T var, unsigned delta, std::source_location where = std::source_location::current()) const {
    return __shfl_down_sync(mask(), var, delta, Size, where);
  }
  template <class T>
  T shfl_up(T var, unsigned delta, std::source_location where = std::source_location::current()) const {
    return __shfl_up_sync(mask(), var, delta, Size, where);
  }
  template <class T>
  T shfl_xor(T var, unsigned lane_mask, std::source_location where = std::source_location::current()) const {
    return __shfl_xor_sync(mask(), var, int(lane_mask), Size, where);
  }
  unsigned ballot(int predicate, std::source_location where = std::source_location::current()) const {
    return __ballot_sync(mask(), predicate, where) >> first_lane();
  }
  bool any(int predicate, std::source_location where = std::source_location::current()) const {
    return __any_sync(mask(), predicate, where);
  }
  bool all(int predicate, std::source_location where = std::source_location::current()) const {
    return __all_sync(mask(), predicate, where);
  }

 private:
  static unsigned long long rank() { return this_thread_block().thread_rank(); }
  static unsigned first_lane() { return unsigned(rank() % 32) / Size * Size; }
  static unsigned mask() {  // Note [tile masks]
    const unsigned lanes = Size == 32 ? ~0u : ((1u << Size) - 1u) << first_lane();
    return lanes & __activemask();
  }
};

template <unsigned Size, class Parent>
thread_block_tile<Size> tiled_partition(const Parent&) {
  return {};
}

template <class T>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T>
struct less {
  T operator()(const T& a, const T& b) const { return b < a ? b : a; }  // the smaller
};
template <class T>
struct greater {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }  // the larger
};
template <class T>
struct bit_and {
  T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T>
struct bit_or {
  T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T>
struct bit_xor {
  T operator()(const T& a, const T& b) const { return a ^ b; }
};

// The tile-wide reduction of `value` with `op`, returned to every thread of the tile
// (a butterfly of shfl_xor).
template <unsigned Size, class T, class Op>
T reduce(const thread_block_tile<Size>& tile, T value, Op op) {
  for (unsigned offset = Size / 2; offset > 0; offset /= 2) value = op(value, tile.shfl_xor(value, offset));
  return value;
}

}  // namespace cooperative_groups
