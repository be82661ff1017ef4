#include "apps/bench/machine_peak.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/gemm_microkernel.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::bench {
namespace {

// Note [FMA peak]: 16 independent accumulators cover the FMA latency (4 cycles) times the two
// FMA ports with room to spare; the vector width follows the build (-march=native gives
// AVX-512 here). The compiler cannot fold the loop because the inputs come through volatile.
// The chain loop is unrolled by pragma so that the accumulators live in registers: without it
// GCC kept them in memory on an Intel build, and the "peak" came out at half what the GEMM
// itself reached.
typedef float vec __attribute__((vector_size(64)));
constexpr int kChains = 16;
constexpr int64_t kIters = 1 << 20;

float fma_loop(float seed) {
  vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = vec{} + seed * float(c + 1);
  const vec mul = vec{} + 0.999999f, add = vec{} + 1e-7f;
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;
  }
  float s = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < int(sizeof(vec) / sizeof(float)); ++l) s += acc[c][l];
  return s;
}


volatile float g_seed = 1.0f, g_sink = 0.0f;

// The median over `blocks` rounds (after one warm-up round) of the milliseconds that `threads`
// threads take to run body(t), t in [0, threads), each on a thread of its own (the caller runs
// t = 0), all released together once started; a round lasts as long as its slowest thread.
// Note [Peaks on dedicated threads]: a peak is what every thread does at once, so each must run
// exactly one share. On the pool's dynamic chunks (Note [Dynamic chunks] in core/parallel.h) the
// caller could claim both shares before the worker woke, and the 2-thread FMA peak read the
// 1-thread one (117 instead of ~225 GFLOP/s, in one `bench ops` run of several). Thread creation
// is left out of the time.
template <class Body>
double median_ms_on_threads(int threads, const Body& body, int blocks = 5) {
  using clock = std::chrono::steady_clock;
  std::vector<double> rounds;
  for (int round = 0; round <= blocks; ++round) {
    std::vector<double> ms(size_t(threads), 0.0);
    std::latch start(threads);
    auto timed = [&](int t) {
      start.arrive_and_wait();
      const auto t0 = clock::now();
      body(t);
      ms[size_t(t)] = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    };
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back(timed, t);
    timed(0);
    for (std::thread& other : others) other.join();
    if (round > 0) rounds.push_back(*std::max_element(ms.begin(), ms.end()));  // round 0: warm-up
  }
  std::nth_element(rounds.begin(), rounds.begin() + blocks / 2, rounds.end());
  return rounds[size_t(blocks / 2)];
}

// GFLOP/s of `threads` threads each running `loop` once, which does `flops_per_thread`.
template <class Loop>
double measure_loop_gflops(int threads, double flops_per_thread, Loop loop) {
  std::vector<float> results(size_t(threads), 0.0f);
  const double ms = median_ms_on_threads(threads, [&](int t) { results[size_t(t)] = loop(g_seed); });
  for (float r : results) g_sink = g_sink + r;
  return flops_per_thread * threads / (ms * 1e6);
}

}  // namespace

double measure_fma_gflops(int threads) {
  return measure_loop_gflops(threads, 2.0 * kChains * double(sizeof(vec) / sizeof(float)) * double(kIters), fma_loop);
}

// Note [bf16 peak]: vdpbf16ps's rate differs by CPU: on the Zen 5 machine where ember's bf16
// GEMM was written it issued as fast as vfmadd (twice its flops); on an Emerald Rapids machine
// (family 6, model 207) at half that rate, so at the same flops. The ratio is the one the bf16
// GEMM measures to pick its form (avx512_bf16_dot_speedup, Note [Widened bf16 GEMM]), applied
// to the FMA peak measured here, so that the bf16 rows' "% of peak" is honest on either.
// AMX's peak is measured directly (its rate has nothing to do with the FMA's).
double bf16_gemm_peak_gflops(int threads, double fma_gflops) {
  const cpu::gemm_detail::Bf16Kernel kernel = cpu::gemm_detail::default_bf16_kernel();
  if (kernel.amx) return measure_amx_bf16_gflops(threads);
  if (kernel.dot) return fma_gflops * cpu::gemm_detail::avx512_bf16_dot_speedup();
  return fma_gflops;
}

std::string bf16_gemm_form() {
  const cpu::gemm_detail::Bf16Kernel kernel = cpu::gemm_detail::default_bf16_kernel();
  if (kernel.amx)
    return kernel.amx == cpu::gemm_detail::amx_bf16_micro_kernel() ? "AMX tiles" : "AMX tiles, emulated (no AMX here)";
  return kernel.dot ? "vdpbf16ps pair kernel" : "widened to f32 while packing";
}

double measure_amx_bf16_gflops(int threads) {
  constexpr int64_t kRounds = 1 << 16;  // 262k instructions: ~1.2 ms at one per 16 cycles
  const double flops = cpu::gemm_detail::amx_bf16_peak_loop(1);
  if (flops == 0) return 0;
  return measure_loop_gflops(threads, flops * kRounds, [](float seed) {
    cpu::gemm_detail::amx_bf16_peak_loop(kRounds);
    return seed;
  });
}

std::string cpu_identity() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor = "unknown vendor", family = "?", model = "?", flags;
  auto value = [](const std::string& l) { return l.substr(l.find(':') + 2); };
  while (std::getline(cpuinfo, line) && line.find(':') != std::string::npos) {  // the first CPU's block
    if (line.starts_with("vendor_id")) vendor = value(line);
    else if (line.starts_with("cpu family")) family = value(line);
    else if (line.starts_with("model\t")) model = value(line);
    else if (line.starts_with("flags")) flags = std::string(" ").append(value(line)).append(" ");
  }
  std::string id = vendor + " family " + family + " model " + model;
  for (const char* f : {"avx512f", "avx512_bf16", "amx_bf16"})
    id += flags.find(std::string(" ") + f + " ") != std::string::npos ? std::string(", ") + f : std::string(", no ") + f;
  return id;
}

double measure_memcpy_gbps(int threads) {
  const size_t bytes = size_t(64) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const double ms = median_ms_on_threads(threads, [&](int t) {
    const size_t lo = bytes / size_t(threads) * size_t(t), hi = t + 1 == threads ? bytes : lo + bytes / size_t(threads);
    std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
  });
  return 2.0 * double(bytes) / (ms * 1e6);
}

}  // namespace ember::bench
