// The machine's limits, measured in the same run as the figures they are compared with.
#pragma once

#include <string>

namespace ember::bench {

// This machine's CPU as /proc/cpuinfo names it (vendor, family, model) and whether it has the
// vector extensions the CPU kernels use: figures differ by CPU, so benchmarks print it.
std::string cpu_identity();

// GFLOP/s of `threads` threads each running independent chains of vector FMAs.
double measure_fma_gflops(int threads);
// GFLOP/s of the same with vdpbf16ps (Note [bf16 peak]); 0 when the build has no AVX512-BF16.
double measure_bf16_dot_gflops(int threads);
// GB/s (bytes read + written) of memcpy between two 64 MiB buffers, split over `threads`.
double measure_memcpy_gbps(int threads);

}  // namespace ember::bench
