// `ember bench kernels-nn`: milliseconds per call of the nn kernels that a small CNN's training
// step spends its time in, for comparison with apps/bench/torch_kernels_nn.py (same row names,
// same shapes, same thread count), which the CLI runs in the same session.
//
//   for (const auto& row : bench_kernels_nn(/*threads=*/2))
//     std::printf("%s %.4f\n", row.name.c_str(), row.ember_ms);
//
// Rows: softmax (dim 1) and cross-entropy forward and backward, relu forward and backward,
// f32 matmul. "_fwd" times the op under NoGradGuard; "_bwd" times one backward pass through an
// already-recorded graph (retained, the input's .grad dropped each call), as the PyTorch script
// does. Each figure is the median of several timed blocks after a warm-up block.
#pragma once

#include <vector>

#include "apps/bench/kernel_row.h"
#include "core/device.h"

namespace ember {

// threads > 0 sets ember's thread count first; 0 keeps the current one. The rows run on
// `device`.
std::vector<bench::KernelRow> bench_kernels_nn(int threads = 0, Device device = Device::cpu());

}  // namespace ember
