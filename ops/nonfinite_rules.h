// How count_nonfinite (ops/kernels.h) tallies NaN and infinite elements: one rule for the CPU
// loop and the CUDA kernel, so both count the same elements and report the same first index.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ember {

// Trivially constructible (no member initialisers), so CUDA kernels may hold it in __shared__
// memory; start from identity().
struct NonfiniteTally {
  static constexpr int64_t kNone = INT64_MAX;  // no non-finite element yet (combines as a minimum)
  int64_t nan, inf;
  int64_t first;  // the smallest flat index of a non-finite element, or kNone

  static EMBER_HOST_DEVICE NonfiniteTally identity() { return {0, 0, kNone}; }

  // v - v is 0 for every finite v and NaN for NaN and +-Inf, so this test vectorises.
  template <class T>
  static EMBER_HOST_DEVICE bool is_nonfinite(T v) {
    return !(v - v == T(0));
  }
  template <class T>
  EMBER_HOST_DEVICE void add(T v, int64_t index) {
    if (!is_nonfinite(v)) return;
    if (v != v) ++nan;
    else ++inf;
    if (index < first) first = index;
  }
  static EMBER_HOST_DEVICE NonfiniteTally combine(NonfiniteTally a, NonfiniteTally b) {
    return {a.nan + b.nan, a.inf + b.inf, a.first < b.first ? a.first : b.first};
  }
  // count_nonfinite's out: [nan, inf, first or -1].
  EMBER_HOST_DEVICE void store(int64_t* out) const {
    out[0] = nan;
    out[1] = inf;
    out[2] = first == kNone ? -1 : first;
  }
};

}  // namespace ember
