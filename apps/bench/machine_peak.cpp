#include "apps/bench/machine_peak.h"

#include <cstring>
#include <vector>

#include "apps/bench/timing.h"
#include "core/parallel.h"

namespace ember::bench {
namespace {

// Note [FMA peak]: 16 independent accumulators cover the FMA latency (4 cycles) times the two
// FMA ports with room to spare; the vector width follows the build (-march=native gives
// AVX-512 here). The compiler cannot fold the loop because the inputs come through volatile.
typedef float vec __attribute__((vector_size(64)));
constexpr int kChains = 16;
constexpr int64_t kIters = 1 << 20;

float fma_loop(float seed) {
  vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = vec{} + seed * float(c + 1);
  const vec mul = vec{} + 0.999999f, add = vec{} + 1e-7f;
  for (int64_t i = 0; i < kIters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;
  float s = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < int(sizeof(vec) / sizeof(float)); ++l) s += acc[c][l];
  return s;
}

volatile float g_seed = 1.0f, g_sink = 0.0f;

}  // namespace

double measure_fma_gflops(int threads) {
  const double flops_per_thread = 2.0 * kChains * double(sizeof(vec) / sizeof(float)) * double(kIters);
  const double ms = median_ms(
      [&] {
        parallel_for(0, threads, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) g_sink = g_sink + fma_loop(g_seed);
        });
      },
      {.warmup = 1, .blocks = 5, .iters = 1});
  return flops_per_thread * threads / (ms * 1e6);
}

double measure_memcpy_gbps(int threads) {
  const size_t bytes = size_t(64) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const double ms = median_ms(
      [&] {
        parallel_for(0, threads, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const size_t lo = bytes / size_t(threads) * size_t(t), hi = t + 1 == threads ? bytes : lo + bytes / size_t(threads);
            std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
          }
        });
      },
      {.warmup = 1, .blocks = 5, .iters = 2});
  return 2.0 * double(bytes) / (ms * 1e6);
}

}  // namespace ember::bench
