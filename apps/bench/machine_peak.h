// The machine's limits, measured in the same run as the figures they are compared with.
#pragma once

namespace ember::bench {

// GFLOP/s of `threads` threads each running independent chains of vector FMAs.
double measure_fma_gflops(int threads);
// GB/s (bytes read + written) of memcpy between two 64 MiB buffers, split over `threads`.
double measure_memcpy_gbps(int threads);

}  // namespace ember::bench
