// The oneDNN peer of the CPU benchmarks (apps/bench/onednn_peer.h) computes what ember computes:
// every convolution pass on shapes with groups, strides, padding that the window does not reach,
// dilation, 1x1 and bf16, and the GEMM. Without oneDNN in the build it reports none of them.
#include <catch2/catch.hpp>

#include <iterator>

#include "apps/bench/onednn_peer.h"
#include "ember.h"
#include "ops/cpu/gemm.h"

using namespace ember;
namespace onednn = ember::bench::onednn;

namespace {

struct Case {
  Shape x, w;
  IntPair stride, pad, dilation;
  int64_t groups;
};

}  // namespace

TEST_CASE("onednn peer: every convolution pass matches ember's") {
  const Case cases[] = {
      {{2, 8, 9, 9}, {16, 8, 3, 3}, 1, 1, 1, 1},     // plain 3x3
      {{2, 8, 10, 10}, {8, 2, 3, 3}, 2, 1, 1, 4},    // grouped, strided: the window misses the last column
      {{1, 6, 8, 8}, {6, 1, 3, 3}, 1, 2, 2, 6},      // depthwise, dilated
      {{2, 16, 7, 7}, {8, 16, 1, 1}, 1, 0, 1, 1},    // 1x1
      {{1, 3, 15, 15}, {4, 3, 7, 7}, 2, 3, 1, 1},    // a 7x7/2 stem
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    const Conv2dGeometry g = conv2d_geometry(c.x, c.w, c.stride, c.pad, c.dilation, c.groups);
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (cpu::ConvPass pass : {cpu::ConvPass::forward, cpu::ConvPass::input_grad, cpu::ConvPass::weight_grad}) {
        INFO("case " << i << ", " << dtype_name(dtype) << ", pass " << int(pass));
        const onednn::ConvRun run = onednn::conv_pass(g, pass, dtype, 2);
        if (!onednn::available()) {
          CHECK(!run.call);
          continue;
        }
        REQUIRE(run.call);
        CHECK(run.max_error < (dtype == DType::bf16 ? 3e-2 : 1e-4));
        run.call();  // runs again on the same buffers
      }
    }
  }
}

TEST_CASE("onednn peer: sgemm matches ember's GEMM") {
  if (!onednn::available()) return;
  const int64_t M = 37, N = 53, K = 29;
  const Tensor a = randn({M, K}), b = randn({K, N});
  Tensor want = zeros({M, N}), got = zeros({M, N});
  cpu::gemm<float>(false, false, M, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f, want.data<float>(), N);
  onednn::sgemm(M, N, K, a.data<float>(), b.data<float>(), got.data<float>(), 2);
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t i = 0; i < M * N; ++i) REQUIRE(g[i] == Approx(w[i]).margin(1e-4));
}
