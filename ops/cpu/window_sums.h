// Sums over pooling windows, for the average pools of ops/cpu/pool.cpp, in compute_t<T> (f32 for
// bf16 and f16 elements, which are widened exactly):
//   compute_t<T> s = run_sum(p, n);                    // p[0] + ... + p[n - 1]
//   compute_t<T> w = window_sum(plane, W, rows, cols); // rows x cols of a plane W wide
#pragma once

#include <cstdint>

#include "ops/cpu/float16_blocks.h"
#include "ops/pool_windows.h"

namespace ember::cpu {

// Note [Window sums]: one running sum makes every add wait for the one before (4 cycles each),
// which made the global average of SE-ResNeXt's SE blocks (3136 values a plane) 4% of a batch-1
// inference. A long run is summed in kLanes interleaved partial sums, added up in a fixed order
// at the end: the compiler turns the lanes into vector registers, and the result is the same on
// every run and thread count. Runs under 2 * kLanes (the windows of ordinary pooling) keep the
// plain left-to-right sum. 16-bit elements are widened a block at a time (Note [Blocks of 16]), so
// their sums are those of the f32 values they widen to.
template <class T>
compute_t<T> run_sum(const T* p, int64_t n) {
  using C = compute_t<T>;
  constexpr int kLanes = 16;
  C sum = 0;
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    C lanes[kLanes] = {};
    for (; i + kLanes <= n; i += kLanes) {
      C v[kLanes];
      load_block<kLanes>(p + i, v);
      for (int l = 0; l < kLanes; ++l) lanes[l] += v[l];
    }
    for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  }
  for (; i < n; ++i) sum += C(p[i]);
  return sum;
}

// The sum of rows r x columns c of a plane W wide: one run when the columns span whole rows
// (a global average), else left to right along each row, row after row.
template <class T>
compute_t<T> window_sum(const T* plane, int64_t W, Span r, Span c) {
  if (c.begin == 0 && c.end == W) return run_sum(plane + r.begin * W, (r.end - r.begin) * W);
  compute_t<T> sum = 0;
  for (int64_t h = r.begin; h < r.end; ++h)
    for (int64_t w = c.begin; w < c.end; ++w) sum += compute_t<T>(plane[h * W + w]);
  return sum;
}

}  // namespace ember::cpu
