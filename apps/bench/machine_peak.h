// The machine's limits, measured in the same run as the figures they are compared with.
#pragma once

#include <string>

namespace ember::bench {

// This machine's CPU as /proc/cpuinfo names it (vendor, family, model) and whether it has the
// vector extensions the CPU kernels use: figures differ by CPU, so benchmarks print it.
std::string cpu_identity();

// GFLOP/s of `threads` threads each running independent chains of vector FMAs.
double measure_fma_gflops(int threads);
// The vdpbf16ps peak for an FMA peak of `fma_gflops` (Note [bf16 peak] in machine_peak.cpp);
// 0 when the build has no AVX512-BF16.
double bf16_dot_gflops(double fma_gflops);
// GB/s (bytes read + written) of memcpy between two 64 MiB buffers, split over `threads`.
double measure_memcpy_gbps(int threads);

}  // namespace ember::bench
