// `ember bench kernels` (convolution and pooling rows): milliseconds per call of the CPU conv
// and pool kernels on a few 3x3 convolution shapes (bench_kernels_conv.cpp), for comparison with
// apps/bench/torch_kernels.py, which prints the same rows for PyTorch.
//
//   for (const bench::KernelRow& row : bench_kernels_conv()) std::cout << row.name << " " << row.ember_ms << "\n";
#pragma once

#include <vector>

#include "apps/bench/kernel_row.h"
#include "core/device.h"

namespace ember {

// Times each row on `device` (on the cpu, the current thread pool decides the thread count).
std::vector<bench::KernelRow> bench_kernels_conv(Device device = Device::cpu());

}  // namespace ember
