// Conv2dWeightPack (ops/conv_weight_pack.h, Note [Conv weight packs] in ops/cpu/conv.cpp): a
// forward with a pack gives the bits of one without, packs once for many calls, and packs again
// whenever the weights it is given are not the ones it holds.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ember.h"
#include "ops/cpu/gemm.h"
#include "ops/kernels.h"
#include "support/test_support.h"

using namespace ember;

namespace {

struct Layer {
  const char* name;
  int64_t in, out, kernel, stride, groups, side, batch;
};

// The algorithms the GEMM path takes: a 1x1 layer (the image is the column matrix) at batch 1 and
// 3, an im2col layer, a strided one, and a grouped one with 2 groups.
const Layer kLayers[] = {
    {"1x1, batch 1", 64, 96, 1, 1, 1, 7, 1},   {"1x1, batch 3", 64, 96, 1, 1, 1, 7, 3},
    {"3x3 im2col", 5, 40, 3, 1, 1, 9, 2},      {"1x1 stride 2", 32, 48, 1, 2, 1, 8, 2},
    {"3x3, 2 groups", 16, 24, 3, 1, 2, 6, 2},
};

}  // namespace

TEST_CASE("conv weight pack: a forward with a pack gives the bits of one without") {
  Generator gen(11);
  int64_t packed_layers = 0;
  for (const Layer& l : kLayers) {
    INFO(l.name);
    const Tensor x = randn({l.batch, l.in, l.side, l.side}, {}, &gen);
    const Tensor w = randn({l.out, l.in / l.groups, l.kernel, l.kernel}, {}, &gen);
    const Tensor b = randn({l.out}, {}, &gen);
    const int64_t pad = l.kernel / 2;
    const Tensor expected = conv2d(x, w, b, l.stride, pad, 1, l.groups, Activation::relu);
    Conv2dWeightPack pack;
    for (int call = 0; call < 3; ++call)
      CHECK_THAT(conv2d(x, w, b, l.stride, pad, 1, l.groups, Activation::relu, &pack), test::all_close(expected, 0, 0));
    // Where the forward is a GEMM of ember's the first call packs and the others read its panels
    // (the direct and grid algorithms, and Eigen under EMBER_GEMM=eigen, leave the pack empty).
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), l.stride, pad, 1, l.groups);
    const std::string algorithm = cpu::conv2d_algorithm(g, cpu::ConvPass::forward);
    INFO(algorithm);
    const bool gemm = algorithm == "1x1 gemm" || algorithm == "im2col+gemm";
    CHECK(pack.builds() == (gemm && cpu::f32_gemm_is_ember() ? 1 : 0));
    packed_layers += pack.builds();
  }
  if (cpu::f32_gemm_is_ember()) CHECK(packed_layers >= 3);  // the layers do exercise the pack
}

TEST_CASE("conv weight pack: packs again after the weights change or for other weights") {
  Generator gen(12);
  const Tensor x = randn({1, 32, 5, 5}, {}, &gen);
  Tensor w = randn({40, 32, 1, 1}, {}, &gen);
  Conv2dWeightPack pack;
  conv2d(x, w, {}, 1, 0, 1, 1, Activation::none, &pack);
  const bool packs = cpu::f32_gemm_is_ember();
  // In place: a new version of the same storage.
  w.mul_(-0.5);
  CHECK_THAT(conv2d(x, w, {}, 1, 0, 1, 1, Activation::none, &pack), test::all_close(conv2d(x, w), 0, 0));
  // Other weights of the same shape.
  const Tensor other = randn({40, 32, 1, 1}, {}, &gen);
  CHECK_THAT(conv2d(x, other, {}, 1, 0, 1, 1, Activation::none, &pack), test::all_close(conv2d(x, other), 0, 0));
  // Another view of the storage the pack holds: output channels 8..31, another offset.
  conv2d(x, w, {}, 1, 0, 1, 1, Activation::none, &pack);
  const Tensor rows = w.narrow(0, 8, 24);
  CHECK_THAT(conv2d(x, rows, {}, 1, 0, 1, 1, Activation::none, &pack), test::all_close(conv2d(x, rows), 0, 0));
  // The same weights cut into two groups: an input with twice the channels, 20 outputs a group.
  const Tensor x2 = randn({1, 64, 5, 5}, {}, &gen);
  conv2d(x, w, {}, 1, 0, 1, 1, Activation::none, &pack);
  const Tensor grouped = conv2d(x2, w, {}, 1, 0, 1, 2, Activation::none, &pack);
  CHECK_THAT(grouped, test::all_close(conv2d(x2, w, {}, 1, 0, 1, 2), 0, 0));
  CHECK(pack.builds() == (packs ? 7 : 0));
}

TEST_CASE("conv weight pack: threads sharing one pack all get the unpacked result") {
  Generator gen(13);
  const Tensor w = randn({64, 48, 1, 1}, {}, &gen);
  std::vector<Tensor> inputs, expected;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(randn({1, 48, 7, 7}, {}, &gen));
    expected.push_back(conv2d(inputs.back(), w));
  }
  Conv2dWeightPack pack;
  std::vector<Tensor> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      autograd::NoGradGuard no_grad;
      for (int call = 0; call < 5; ++call)
        results[size_t(t)] = conv2d(inputs[size_t(t)], w, {}, 1, 0, 1, 1, Activation::none, &pack);
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) CHECK_THAT(results[size_t(t)], test::all_close(expected[size_t(t)], 0, 0));
  CHECK(pack.builds() == (cpu::f32_gemm_is_ember() ? 1 : 0));
}
