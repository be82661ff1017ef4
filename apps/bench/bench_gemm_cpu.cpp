#include "apps/bench/bench_gemm_cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ember.h"
#include "ops/cpu/gemm.h"

namespace ember::bench {
namespace {

struct GemmShape {
  int64_t M, N, K;
  std::string label() const {
    return M == N && N == K ? std::to_string(M) + "^3"
                            : std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  }
};

// Milliseconds per call of a and of b: both warmed up and calibrated alone, then timed in
// alternating blocks (a, b, a, b, ...), the median block of each reported.
std::pair<double, double> alternating_median_ms(const std::function<void()>& a, const std::function<void()>& b,
                                                int blocks = 7) {
  using clock = std::chrono::steady_clock;
  auto calls_for_20ms = [](const std::function<void()>& fn) {
    const auto warm = clock::now();  // warm-up: first touches, clock ramp-up
    do fn();
    while (std::chrono::duration<double, std::milli>(clock::now() - warm).count() < 30);
    const auto t0 = clock::now();
    fn();
    const double one = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    return std::clamp(int(20.0 / std::max(one, 1e-3)), 1, 10000);
  };
  const int iters_a = calls_for_20ms(a), iters_b = calls_for_20ms(b);
  auto block = [](const std::function<void()>& fn, int iters) {
    const auto t0 = clock::now();
    for (int i = 0; i < iters; ++i) fn();
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count() / iters;
  };
  std::vector<double> ta, tb;
  for (int i = 0; i < blocks; ++i) {
    ta.push_back(block(a, iters_a));
    tb.push_back(block(b, iters_b));
  }
  std::nth_element(ta.begin(), ta.begin() + blocks / 2, ta.end());
  std::nth_element(tb.begin(), tb.begin() + blocks / 2, tb.end());
  return {ta[size_t(blocks / 2)], tb[size_t(blocks / 2)]};
}

}  // namespace

void bench_gemm_cpu(std::ostream& out, const Table& table, int threads, double fma_peak) {
  const GemmShape shapes[] = {{32, 32, 32},     {64, 64, 64},     {128, 128, 128},   {256, 256, 256},
                              {512, 512, 512},  {1024, 1024, 1024}, {2048, 2048, 2048}, {32, 3136, 288},
                              {64, 196, 576},   {2048, 49, 1024}};
  for (const GemmShape& s : shapes) {
    const Tensor a = randn({s.M, s.K}), b = randn({s.K, s.N});
    Tensor c = zeros({s.M, s.N});
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* pc = c.data<float>();
    const auto [ember_ms, eigen_ms] = alternating_median_ms(
        [&] { cpu::gemm<float>(false, false, s.M, s.N, s.K, 1.0f, pa, s.K, pb, s.N, 0.0f, pc, s.N); },
        [&] { cpu::gemm_eigen<float>(false, false, s.M, s.N, s.K, 1.0f, pa, s.K, pb, s.N, 0.0f, pc, s.N); });
    const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
    for (const auto& [name, ms] : {std::pair<const char*, double>{"gemm ember", ember_ms}, {"gemm eigen", eigen_ms}}) {
      const double gflops = flops / (ms * 1e6);
      out << table.row({name, s.label(), std::to_string(threads), fixed(ms, 3), fixed(gflops, 1) + " GFLOP/s",
                        fixed(fma_peak, 1) + " GFLOP/s", fixed(100 * gflops / fma_peak, 1) + "%"})
          << "\n";
    }
  }
}

}  // namespace ember::bench
