// `ember bench kernels` (convolution and pooling rows): milliseconds per call of the CPU conv
// and pool kernels on the shapes of the convolution issue, for comparison with
// apps/bench/torch_kernels.py, which prints the same rows for PyTorch.
//
//   for (const KernelTiming& row : bench_kernels_conv()) std::cout << row.name << " " << row.ember_ms << "\n";
#pragma once

#include <string>
#include <vector>

namespace ember {

struct KernelTiming {
  std::string name;  // e.g. "conv2d_forward_n2_c4to8_64x64_k3p1" (the Python script uses the same names)
  double ember_ms;   // median over timed blocks after a warm-up, per call
};

// Times each row on the current thread pool (set_num_threads decides the thread count).
std::vector<KernelTiming> bench_kernels_conv();

}  // namespace ember
