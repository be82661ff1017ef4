// Note [f16 on the grid] (ops/cpu/conv_grid_tiles_avx512.h): an f16 pass that the padded grid runs
// is widened into its f32 workspace and rounded once on the way out, so it must give the bits of
// the f32 pass on the widened tensors, rounded to f16 (what the op computed before, and still
// computes for every other f16 convolution); the row copies must widen and round as
// half_bits_to_float and float_to_half_bits do, special values included.
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "ember.h"
#include "ops/cpu/conv_direct.h"
#include "ops/kernels.h"
#include "support/test_support.h"
#include "grid_checks.h"
#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_layout_avx512.h"
#endif

using namespace ember;

TEST_CASE("the grid's f16 row copies round as float_to_half_bits and widen exactly, every other one too",
          "[conv][f16]") {
#if defined(__AVX512F__)
  if constexpr (!cpu::grid_detail::kGridTakesF16) {
    WARN("this build's grid takes no f16 (it needs AVX512-BW and -VL)");
  } else {
    // Ties to even, the overflow to infinity at 65520, subnormals, infinities, signalling and quiet
    // NaNs of both signs, zeros.
    test::check_grid_rounding<Half>({0x3F801000u, 0x3F803000u, 0x477FEFFFu, 0x477FF000u, 0x33800000u, 0x33000001u,
                                     0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u, 0x7FC12345u, 0x00000000u,
                                     0x80000000u, 0x387FC000u, 0xC7000000u, 0x00000001u, 0x3E2AAAABu},
                                    777, float_to_half_bits);
    // Widened: every half's value, signalling NaNs keeping their quiet bit clear.
    std::vector<Half> halves;
    for (uint32_t h = 0; h < 65536; ++h) halves.push_back(Half::from_bits(uint16_t(h)));
    halves.push_back(Half::from_bits(0x7C01));  // a tail
    std::vector<float> widened(halves.size() + 1, -7.0f);
    cpu::grid_detail::copy_rows(halves.data(), 0, widened.data(), 0, 1, int64_t(halves.size()));
    for (size_t j = 0; j < halves.size(); ++j) {
      INFO("half 0x" << std::hex << halves[j].bits);
      CHECK(std::bit_cast<uint32_t>(widened[j]) == std::bit_cast<uint32_t>(half_bits_to_float(halves[j].bits)));
    }
    CHECK(widened.back() == -7.0f);
    // Every other one (stride-2 layers), a count that ends inside a vector.
    const int64_t count = 16 * 3 + 5;
    std::vector<float> evens(size_t(count) + 1, -7.0f);
    cpu::grid_detail::copy_every_other(halves.data() + 0x7BF0, evens.data(), count);
    for (int64_t j = 0; j < count; ++j) {
      INFO("half 0x" << std::hex << halves[size_t(0x7BF0 + 2 * j)].bits);
      CHECK(std::bit_cast<uint32_t>(evens[size_t(j)]) ==
            std::bit_cast<uint32_t>(half_bits_to_float(halves[size_t(0x7BF0 + 2 * j)].bits)));
    }
    CHECK(evens.back() == -7.0f);
  }
#else
  WARN("this build has no padded grid (it needs AVX-512)");
#endif
}

TEST_CASE("conv2d's f16 passes on the padded grid give the f32 passes' bits on the widened tensors",
          "[conv][f16]") {
  // The grid takes an ungrouped layer's weight gradient only where its output channels give each
  // thread a block (conv2d_grid_weight_grad_suits): at 2 threads, as CI's machines have.
  const int threads = num_threads();
  set_num_threads(2);
  Generator gen(93);
  int passes_on_grid = 0;
  for (size_t i = 0; i < std::size(test::kGridCases); ++i) {
    const test::GridCase& c = test::kGridCases[i];
    INFO("case " << i << ": " << c.in << " -> " << c.out << " channels in " << c.groups << " groups");
    auto f16 = [](const Tensor& t) { return t.to(DType::f16); };
    auto f32 = [](const Tensor& t) { return t.defined() ? t.to(DType::f32) : Tensor(); };
    auto f64 = [](const Tensor& t) { return t.defined() ? t.to(DType::f64) : Tensor(); };
    const Tensor x = f16(randn({c.batch, c.in, c.h, c.w}, {}, &gen));
    const Tensor w = f16(randn({c.out, c.in / c.groups, c.kernel, c.kernel}, {}, &gen));
    const Tensor b = c.bias ? f16(randn({c.out}, {}, &gen)) : Tensor();
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), c.stride, c.pad, c.dilation, c.groups);
    // The f32 pass's bits where f32 runs the grid too; elsewhere (f32's row kernels sum in another
    // order) within f16's rounding of the f64 result.
    auto check_pass = [&](cpu::ConvPass pass, const Tensor& got, const Tensor& f32_result, const Tensor& f64_result) {
      INFO("pass " << int(pass));
      CHECK(got.dtype() == DType::f16);
      const bool on_grid = cpu::conv2d_takes_f16(g, pass, c.act);
      passes_on_grid += on_grid;
      // f16 takes the grid exactly where f32 does, and is named by it there; elsewhere f32's name.
      const std::string f32_algorithm = cpu::conv2d_algorithm(g, pass, DType::f32);
      CHECK(on_grid == (f32_algorithm == "padded grid" && cpu::conv2d_grid_takes(DType::f16)));
      CHECK(std::string(cpu::conv2d_algorithm(g, pass, DType::f16)) == f32_algorithm);
      const bool same_algorithm = f32_algorithm == "padded grid";
      if (same_algorithm) test::check_close(got.to(DType::f64), f16(f32_result).to(DType::f64), 0, 0);
      else test::check_close(got.to(DType::f64), f64_result, 1.0 / 512, 1e-3);
    };
    const Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dilation, c.groups, c.act);
    check_pass(cpu::ConvPass::forward, y, conv2d(f32(x), f32(w), f32(b), c.stride, c.pad, c.dilation, c.groups, c.act),
               conv2d(f64(x), f64(w), f64(b), c.stride, c.pad, c.dilation, c.groups, c.act));

    const Tensor dy = f16(randn(y.shape(), {}, &gen));
    check_pass(cpu::ConvPass::input_grad, conv2d_input_grad(dy, w, x.shape(), c.stride, c.pad, c.dilation, c.groups),
               conv2d_input_grad(f32(dy), f32(w), x.shape(), c.stride, c.pad, c.dilation, c.groups),
               conv2d_input_grad(f64(dy), f64(w), x.shape(), c.stride, c.pad, c.dilation, c.groups));
    check_pass(cpu::ConvPass::weight_grad, conv2d_weight_grad(x, dy, w.shape(), c.stride, c.pad, c.dilation, c.groups),
               conv2d_weight_grad(f32(x), f32(dy), w.shape(), c.stride, c.pad, c.dilation, c.groups),
               conv2d_weight_grad(f64(x), f64(dy), w.shape(), c.stride, c.pad, c.dilation, c.groups));
  }
  // Every pass of test::kGridCases but the first layer's input gradient (one input channel) and
  // the two layers with groups of 4 at stride 1, whose forwards and input gradients (forwards too)
  // f16 gives to f32's row kernels, as f32 does, where the build has the lanes.
  if (cpu::conv2d_grid_takes(DType::f16)) CHECK(passes_on_grid == 3 * int(std::size(test::kGridCases)) - 5);
  else WARN("this build's grid takes no f16 (it needs AVX512-BW and -VL); only the values are checked");
  set_num_threads(threads);
}

// Note [Non-finite values on the grid]: a non-finite weight (input gradient) or input (weight
// gradient) sends the pass off the grid, where f16 runs f32's passes on widened copies.
TEST_CASE("conv2d's f16 gradients with non-finite operands leave the grid and match f32's", "[conv][f16]") {
  const int threads = num_threads();
  set_num_threads(2);  // where the grid takes this ungrouped layer's weight gradient (as above)
  Generator gen(94);
  Tensor x = randn({2, 16, 9, 9}, {}, &gen), w = randn({16, 16, 3, 3}, {}, &gen);
  x.narrow(1, 3, 1).narrow(2, 4, 1).narrow(3, 4, 1).fill_(std::numeric_limits<double>::infinity());
  w.narrow(0, 2, 1).narrow(1, 5, 1).narrow(2, 1, 1).narrow(3, 1, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const Tensor dy = randn({2, 16, 9, 9}, {}, &gen).to(DType::f16);
  const Tensor x16 = x.to(DType::f16), w16 = w.to(DType::f16);
  const Tensor dx = conv2d_input_grad(dy, w16, x.shape(), 1, 1, 1, 1);
  const Tensor dx32 = conv2d_input_grad(dy.to(DType::f32), w16.to(DType::f32), x.shape(), 1, 1, 1, 1);
  test::check_close(dx.to(DType::f64), dx32.to(DType::f16).to(DType::f64), 0, 0);
  const Tensor dw = conv2d_weight_grad(x16, dy, w.shape(), 1, 1, 1, 1);
  const Tensor dw32 = conv2d_weight_grad(x16.to(DType::f32), dy.to(DType::f32), w.shape(), 1, 1, 1, 1);
  test::check_close(dw.to(DType::f64), dw32.to(DType::f16).to(DType::f64), 0, 0);
  const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), 1, 1, 1, 1);
  if (cpu::conv2d_grid_takes(DType::f16)) {  // both passes would be on the grid with finite operands
    CHECK(cpu::conv2d_takes_f16(g, cpu::ConvPass::input_grad));
    CHECK(cpu::conv2d_takes_f16(g, cpu::ConvPass::weight_grad));
  }
  set_num_threads(threads);
}
