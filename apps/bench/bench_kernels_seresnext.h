// `ember bench kernels` (SE-ResNeXt rows): the convolutions of SE-ResNeXt-50 (32x4d) at its
// layer shapes, forward, input gradient and weight gradient, each with the algorithm ember's
// CPU kernel chose for it, and the fused SE tail (scale_add_relu) forward and backward. The
// PyTorch side is apps/bench/torch_kernels_seresnext.py, whose rows have the same names.
//
//   for (const bench::KernelRow& r : bench_kernels_seresnext()) std::cout << r.name << " " << r.algorithm << "\n";
#pragma once

#include <vector>

#include "apps/bench/kernel_row.h"
#include "core/device.h"

namespace ember {

std::vector<bench::KernelRow> bench_kernels_seresnext(Device device = Device::cpu());

}  // namespace ember
