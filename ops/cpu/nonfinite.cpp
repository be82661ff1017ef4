// count_nonfinite on the CPU (contract in ops/kernels.h, the tally rule in ops/nonfinite_rules.h).
// Chunks first test all their elements with a branch-free (vectorised) loop and tally one by
// one only when that finds something, so the usual all-finite tensor costs one streaming pass.
// Chunks combine by sums and a minimum, so the result does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
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

// Note [Non-finite embeddings] (ops/metric_rules.h): one streaming pass over the bit patterns
// (all_finite), then 0 or NaN.
void nonfinite_poison(const Tensor& x, const Tensor& poison) {
  dispatch_float(x.dtype(), "nonfinite_poison", [&]<class T>(TypeTag<T>) {
    poison.data<T>()[0] = all_finite(x) ? T(0) : T(NAN);
  });
}

void zero_loss_gate(const Tensor& grad, const Tensor& counted, const Tensor& poison, const Tensor& out) {
  dispatch_float(grad.dtype(), "zero_loss_gate", [&]<class T>(TypeTag<T>) {
    const double* c = counted.data<double>();
    bool any = false;
    for (int64_t k = 0; k < counted.numel(); ++k) any |= c[k] > 0;
    const T* g = grad.data<T>();
    T* o = out.data<T>();
    const T p = poison.data<T>()[0];
    const int64_t n = out.numel();  // hoisted: the stores through o would otherwise reload it
    if (!any) std::fill(o, o + n, T(0));
    else
      for (int64_t i = 0; i < n; ++i) o[i] = g[i] + p;
  });
}

bool all_finite(const Tensor& x) {
  bool finite = true;
  dispatch_float_or_16_bit(x.dtype(), "all_finite", [&]<class T>(TypeTag<T>) {
    // The exponent field all ones: infinity or NaN. On the bits, so that 16-bit types vectorise.
    using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
    constexpr Bits kExponent = sizeof(T) == 8   ? Bits(0x7FF0000000000000ull)
                               : sizeof(T) == 4 ? Bits(0x7F800000u)
                               : std::is_same_v<T, BFloat16> ? Bits(0x7F80u)
                                                              : Bits(0x7C00u);
    const Bits* bits = reinterpret_cast<const Bits*>(x.data<T>());
    std::atomic<bool> found{false};
    parallel_for(0, x.numel(), kChunk, [&](int64_t begin, int64_t end) {
      int64_t part = 0;
      for (int64_t i = begin; i < end; ++i) part += (bits[i] & kExponent) == kExponent;
      if (part > 0) found = true;
    });
    finite = !found;
  });
  return finite;
}

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
