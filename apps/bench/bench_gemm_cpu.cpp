#include "apps/bench/bench_gemm_cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "apps/bench/onednn_peer.h"
#include "ember.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::bench {
namespace {

struct GemmShape {
  int64_t M, N, K;
  std::string label() const {
    return M == N && N == K ? std::to_string(M) + "^3"
                            : std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
  }
};

// Milliseconds per call of each function: each warmed up and calibrated alone, then all timed in
// alternating blocks (f0, f1, ..., f0, f1, ...), the median block of each reported.
std::vector<double> alternating_median_ms(const std::vector<std::function<void()>>& fns, int blocks = 7) {
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
  std::vector<int> iters;
  for (const auto& fn : fns) iters.push_back(calls_for_20ms(fn));
  auto block = [](const std::function<void()>& fn, int n) {
    const auto t0 = clock::now();
    for (int i = 0; i < n; ++i) fn();
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count() / n;
  };
  std::vector<std::vector<double>> times(fns.size());
  for (int b = 0; b < blocks; ++b)
    for (size_t f = 0; f < fns.size(); ++f) times[f].push_back(block(fns[f], iters[f]));
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::nth_element(t.begin(), t.begin() + blocks / 2, t.end());
    medians.push_back(t[size_t(blocks / 2)]);
  }
  return medians;
}

}  // namespace

void bench_gemm_cpu(std::ostream& out, const Table& table, int threads, double fma_peak, double bf16_peak) {
  const GemmShape shapes[] = {{32, 32, 32},     {64, 64, 64},     {128, 128, 128},   {256, 256, 256},
                              {512, 512, 512},  {1024, 1024, 1024}, {2048, 2048, 2048}, {32, 3136, 288},
                              {64, 196, 576},   {2048, 49, 1024}};
  for (const GemmShape& s : shapes) {
    const Tensor a = randn({s.M, s.K}), b = randn({s.K, s.N});
    Tensor c = zeros({s.M, s.N});
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    float* pc = c.data<float>();
    // The same values rounded to bf16, for the bf16 GEMM's rows.
    std::vector<uint16_t> a16(size_t(s.M * s.K)), b16(size_t(s.K * s.N));
    std::transform(pa, pa + a16.size(), a16.begin(), float_to_bfloat16_bits);
    std::transform(pb, pb + b16.size(), b16.begin(), float_to_bfloat16_bits);
    std::vector<std::function<void()>> fns = {
        [&] { cpu::gemm<float>(false, false, s.M, s.N, s.K, 1.0f, pa, s.K, pb, s.N, 0.0f, pc, s.N); },
        [&] { cpu::gemm_eigen<float>(false, false, s.M, s.N, s.K, 1.0f, pa, s.K, pb, s.N, 0.0f, pc, s.N); },
        [&] {
          cpu::gemm_bf16(s.M, s.N, s.K, 1.0f, cpu::gemm_operand(a16.data(), s.K), cpu::gemm_operand(b16.data(), s.N),
                         0.0f, pc, s.N);
        },
        [&] {  // bf16 activations times f32 weights, rounded while packed: mixed-precision training
          cpu::gemm_bf16(s.M, s.N, s.K, 1.0f, cpu::gemm_operand(a16.data(), s.K), cpu::gemm_operand(pb, s.N), 0.0f,
                         pc, s.N);
        },
    };
    if (onednn::available())
      fns.push_back([&] { onednn::sgemm(s.M, s.N, s.K, pa, pb, pc, threads); });
    const std::vector<double> ms = alternating_median_ms(fns);
    const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
    const char* names[] = {"gemm ember", "gemm eigen", "gemm bf16", "gemm bf16xf32", "gemm onednn"};
    for (size_t r = 0; r < ms.size(); ++r) {
      const double gflops = flops / (ms[r] * 1e6);
      const bool bf16 = r == 2 || r == 3;
      // The bf16 rows' peak is that of the form running (Note [bf16 peak] in machine_peak.cpp);
      // none for a form this CPU only emulates.
      const double peak = bf16 ? bf16_peak : fma_peak;
      std::vector<std::string> cells{names[r], s.label(), std::to_string(threads), fixed(ms[r], 3),
                                     fixed(gflops, 1) + " GFLOP/s", peak > 0 ? fixed(peak, 1) + " GFLOP/s" : "n/a",
                                     peak > 0 ? fixed(100 * gflops / peak, 1) + "%" : "n/a"};
      if (r >= 2) cells.push_back(fixed(ms[0] / ms[r], 2) + "x");  // the rate against gemm ember's
      out << table.row(cells) << "\n";
    }
  }
}

}  // namespace ember::bench
