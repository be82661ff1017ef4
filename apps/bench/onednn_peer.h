// oneDNN (Debian's libdnnl-dev) as a second peer of the CPU benchmarks: its f32 GEMM in
// `ember bench ops` and its convolutions in `ember bench kernels`, timed in the same process and
// the same alternating blocks as ember's. Compiled in only when CMake finds oneDNN (apps/
// CMakeLists.txt); never a dependency of the library. Without it available() is false and the
// benchmarks print "n/a".
//
// Note [oneDNN peer layouts]: each convolution pass is a oneDNN primitive created with
// format_tag::any, so oneDNN picks its own blocked layouts (nChw16c and the like), and the
// operands are reordered into them once, outside the timing. That is the hardest peer to beat:
// a network built on oneDNN keeps its tensors in those layouts from layer to layer, where ember
// and PyTorch's CPU path keep NCHW. Each pass is checked once against ember's result (reordered
// back to NCHW) before it is timed, so that the two do the same work.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "apps/bench/timing.h"
#include "core/dtype.h"
#include "ops/conv_geometry.h"
#include "ops/kernels.h"

namespace ember::bench::onednn {

bool available();
// "oneDNN 2.6.3 (OpenMP, 2 threads)", or why there is none.
std::string identity();

// C (M, N) = A (M, K) @ B (K, N), row-major f32, on `threads` threads.
void sgemm(int64_t M, int64_t N, int64_t K, const float* a, const float* b, float* c, int threads);

// One convolution pass of geometry g on random operands in `dtype` (f32 or bf16), ready to run:
// call() executes the primitive and waits for it. max_error is the largest |oneDNN - ember|
// over the pass's output, divided by ember's largest |value|, measured once when it was built.
struct ConvRun {
  std::function<void()> call;
  double max_error = 0;
  std::string implementation;  // oneDNN's name for what it chose, e.g. "jit_wino_4x3:avx512_core"
};
// Empty call when oneDNN is not available or does not implement the pass.
ConvRun conv_pass(const Conv2dGeometry& g, cpu::ConvPass pass, DType dtype, int threads);

// Median ms per call of conv_pass(g, pass, dtype, threads) under `timing` (-1 when there is none)
// and the implementation oneDNN ran. An Error when oneDNN's result differs from ember's by more
// than rounding (1e-3 of the largest value in f32, 3e-2 in bf16): then one of the two does not
// compute the pass.
// Note [oneDNN's algorithm]: the primitives ask for convolution_auto, so oneDNN may run Winograd
// (jit_wino_4x3: F(4x4, 3x3), about a quarter of a direct convolution's multiplies, the rest in
// transforms) where its heuristics say so: on the Zen 5 of 2026-12-07 the weight gradient of n8 32
// -> 64 at 128 x 128 and MNIST's f32 input gradient. That weight gradient took 9.1-11.0 ms in
// three runs: 440-530 GFLOP/s of direct-convolution work against an FMA peak of 450 measured in
// the same runs, where ember's padded grid took 14.7-16.7 ms (64-73% of the peak). PyTorch's own
// oneDNN convolutions ask for direct ones (ideep's default algorithm), so this peer is the
// stronger one; `bench kernels` names the implementation beside each time.
struct ConvTiming {
  double ms = -1;
  std::string implementation;
};
ConvTiming conv_pass_timing(const Conv2dGeometry& g, cpu::ConvPass pass, DType dtype, int threads,
                            const TimingOptions& timing);

}  // namespace ember::bench::onednn
