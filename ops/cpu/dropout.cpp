// Dropout from counter-based Philox words. Note [Dropout layout]: element i reads word i % 4 of
// Philox block first_block + i / 4 (the f32 layout of ops/cpu/fill.cpp, for f64 too: one word
// decides one element), so the CUDA kernel, any thread of it, and the backward pass all find
// the same keep decision from (seed, first_block, i) alone.
#include <algorithm>

#include "core/parallel.h"
#include "ops/kernels.h"

namespace ember::cpu {

void dropout(const Tensor& x, const Generator& gen, uint64_t first_block, double p, const Tensor& y) {
  dispatch_float(x.dtype(), "dropout", [&]<class T>(TypeTag<T>) {
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    const int64_t n = x.numel(), blocks = (n + 3) / 4;
    const float threshold = float(p);
    const T scale = T(1.0 / (1.0 - p));
    parallel_for(0, blocks, 4096, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const auto w = gen.block(first_block + uint64_t(b));
        const int64_t i0 = b * 4, i1 = std::min(n, i0 + 4);
        for (int64_t i = i0; i < i1; ++i)
          yd[i] = uniform_float(w[size_t(i - i0)]) >= threshold ? xd[i] * scale : T(0);
      }
    });
  });
}

}  // namespace ember::cpu
