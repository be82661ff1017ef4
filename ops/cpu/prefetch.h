// A software prefetch `elements` elements of T past p, for loops that fetch rows ahead of where
// they read or write:
//   prefetch_ahead(row, 4 * stride);          // a row read 4 rows later
//   prefetch_ahead<kForWriting>(dx, 4 * W);   // lines to be written
// The address is computed as an integer: near the end of a buffer it may lie past it, where a
// prefetch does nothing, but a pointer past an array's end would be undefined.
#pragma once

#include <cstdint>

namespace ember::cpu {

constexpr bool kForWriting = true;

template <bool kWrite = false, class T>
inline void prefetch_ahead(const T* p, int64_t elements) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + uintptr_t(elements * int64_t(sizeof(T)));
  __builtin_prefetch(reinterpret_cast<const void*>(at), kWrite ? 1 : 0, 3);
}

}  // namespace ember::cpu
