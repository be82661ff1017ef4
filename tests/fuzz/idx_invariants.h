// What every IDX array the parser returns must satisfy, checked by fuzz_idx and fuzz_gzip.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "datasets/idx.h"

namespace ember::fuzz {

// At least one dim, each a uint32, and exactly product(dims) data bytes; aborts otherwise.
inline void require_consistent(const IdxArray& array, const char* target) {
  uint64_t numel = 1;
  bool ok = !array.dims.empty();
  for (int64_t d : array.dims) {
    ok = ok && d >= 0 && d <= int64_t{UINT32_MAX};
    ok = ok && !__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
  }
  if (!ok || numel != array.data.size()) {
    std::fprintf(stderr, "%s: parsed an IDX array whose dims do not match its %zu data bytes\n", target, array.data.size());
    std::abort();
  }
}

}  // namespace ember::fuzz
