// The machine's limits, measured in the same run as the figures they are compared with.
#pragma once

#include <string>

namespace ember::bench {

// This machine's CPU as /proc/cpuinfo names it (vendor, family, model) and whether it has the
// vector extensions the CPU kernels use: figures differ by CPU, so benchmarks print it.
std::string cpu_identity();

// GFLOP/s of `threads` threads each running independent chains of vector FMAs.
double measure_fma_gflops(int threads);
// The peak of the bf16 GEMM's form on this machine (Note [bf16 peak] in machine_peak.cpp), for
// `threads` threads whose FMA peak is `fma_gflops`; and that form's name.
double bf16_gemm_peak_gflops(int threads, double fma_gflops);
std::string bf16_gemm_form();
// GFLOP/s of `threads` threads each issuing independent AMX TDPBF16PS; 0 without AMX-BF16.
double measure_amx_bf16_gflops(int threads);
// GB/s (bytes read + written) of memcpy between two 64 MiB buffers, split over `threads`.
double measure_memcpy_gbps(int threads);

}  // namespace ember::bench
