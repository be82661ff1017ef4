// count_nonfinite on the CPU (contract in ops/kernels.h, the tally rule in ops/nonfinite_rules.h).
// Chunks first test all their elements with a branch-free (vectorised) loop and tally one by
// one only when that finds something, so the usual all-finite tensor costs one streaming pass.
// Chunks combine by sums and a minimum, so the result does not depend on the thread count.
#include <mutex>

#include "core/parallel.h"
#include "ops/kernels.h"
#include "ops/nonfinite_rules.h"

namespace ember::cpu {
namespace {

constexpr int64_t kChunk = 1 << 16;

template <class T>
NonfiniteTally tally_range(const T* x, int64_t begin, int64_t end) {
  int64_t found = 0;
  for (int64_t i = begin; i < end; ++i) found += NonfiniteTally::is_nonfinite(x[i]);
  NonfiniteTally tally = NonfiniteTally::identity();
  if (found == 0) return tally;
  for (int64_t i = begin; i < end; ++i) tally.add(x[i], i);
  return tally;
}

}  // namespace

void count_nonfinite(const Tensor& x, const Tensor& out) {
  dispatch_float(x.dtype(), "count_nonfinite", [&]<class T>(TypeTag<T>) {
    const T* data = x.data<T>();
    NonfiniteTally total = NonfiniteTally::identity();
    std::mutex total_mutex;
    parallel_for(0, x.numel(), kChunk, [&](int64_t begin, int64_t end) {
      const NonfiniteTally part = tally_range(data, begin, end);
      std::lock_guard<std::mutex> lock(total_mutex);
      total = NonfiniteTally::combine(total, part);
    });
    total.store(out.data<int64_t>());
  });
}

}  // namespace ember::cpu
