// What the GEMM launchers (matmul.cu, sgemm_blocked.cu) share on the host side: the size checks
// and the split of a large batch into launches that fit grid.z. Internal to ops/cuda/.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/error.h"
#include "cuda/launch.h"
#include "ops/cuda/matmul.h"

namespace ember::cuda::detail {


// The kernels index rows, columns and k with int and put column tiles on grid.y.
inline void check_gemm_shape(const char* launcher, const GemmShape& s, int64_t tile_n) {
  EMBER_CHECK(s.batch >= 0 && s.m >= 0 && s.n >= 0 && s.k >= 0, launcher,
              ": expected non-negative sizes, got batch ", s.batch, ", m ", s.m, ", n ", s.n, ", k ", s.k);
  EMBER_CHECK(s.m <= INT_MAX && s.n <= INT_MAX && s.k <= INT_MAX, launcher, ": expected m, n, k <= ", INT_MAX,
              ", got m ", s.m, ", n ", s.n, ", k ", s.k);
  EMBER_CHECK((s.n + tile_n - 1) / tile_n <= kMaxGridY, launcher, ": expected n <= ", kMaxGridY * tile_n,
              " (column tiles go on grid.y), got ", s.n);
}

// Calls launch(items, a, b, c) for consecutive slices of at most kMaxGridZ batch items, with the
// pointers moved to each slice's first item. Nothing to do when c is empty. c's element type may
// differ from the operands' (f32 c for bf16 a and b: gemm_tensor_core.cu).
template <class T, class TC, class Launch>
void for_each_batch_slice(const GemmShape& s, GemmOperand<T> a, GemmOperand<T> b, TC* c, Launch&& launch) {
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  for (int64_t first = 0; first < s.batch; first += kMaxGridZ) {
    const int64_t items = std::min(kMaxGridZ, s.batch - first);
    GemmOperand<T> as = a, bs = b;
    as.data += first * a.batch_stride;
    bs.data += first * b.batch_stride;
    launch(unsigned(items), as, bs, c + first * s.m * s.n);
  }
}

}  // namespace ember::cuda::detail
