// Note [bf16 on the grid] (ops/cpu/conv_grid_tiles_avx512.h): bf16 layers that suit the padded
// grid are widened into its f32 workspace and rounded once on the way out, so a widened pass
// must give the bits of the f32 pass on the widened tensors, rounded to bf16; and the vector
// rounding must be float_to_bfloat16_bits's, special values included. Note [bf16 pairs on the
// grid] and [bf16 weight gradient on position pairs] (ops/cpu/conv_grid_avx512.cpp): where
// vdpbf16ps outruns the FMA the forward (and the stride-1 input gradient, a forward) and the
// weight gradient multiply bf16 pairs instead, whose f32 sums differ in order only: within the
// bf16 rounding of the f64 result there.
#include <bit>
#include <cstdlib>
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
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

using namespace ember;

namespace {

// Whether a and b (same shape) hold the same values, compared in f64 (bf16 -> f64 is exact).
bool same_values(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max(abs(sub(a.to(DType::f64), b.to(DType::f64)))).item() == 0.0;
}

}  // namespace

TEST_CASE("the grid's bf16 row copies round as float_to_bfloat16_bits and widen exactly", "[conv][bf16]") {
#if defined(__AVX512F__)
  if constexpr (!cpu::grid_detail::kGridTakesBf16) {
    WARN("this build's grid takes no bf16 (it needs AVX512-BW and -VL)");
  } else {
    // Ties to even both ways, the largest finite value and the overflow past it, infinities,
    // signalling and quiet NaNs of both signs, subnormals, zeros; then random bit patterns.
    const std::vector<uint32_t> special = {0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x7F7FFFFFu, 0x7F7F7FFFu,
                                           0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFF800001u, 0x7FC00000u,
                                           0xFFFFFFFFu, 0x00000001u, 0x8000FFFFu, 0x00008000u, 0x00000000u,
                                           0x80000000u, 0x007FFFFFu};
    test::check_grid_rounding<BFloat16>(special, 12345, float_to_bfloat16_bits);
    // Widened: exactly, the bits shifted up.
    std::vector<BFloat16> rounded;
    for (uint32_t b : special) rounded.push_back(BFloat16::from_bits(uint16_t(b >> 16)));
    for (uint32_t b = 0; b < 16 * 64 + 9; ++b) rounded.push_back(BFloat16::from_bits(uint16_t(b * 40503u)));
    const int64_t width = int64_t(rounded.size());
    std::vector<float> widened(rounded.size() + 1, -7.0f);
    cpu::grid_detail::copy_rows(rounded.data(), 0, widened.data(), 0, 1, width);
    for (int64_t j = 0; j < width; ++j)
      CHECK(std::bit_cast<uint32_t>(widened[size_t(j)]) == uint32_t(rounded[size_t(j)].bits) << 16);
    CHECK(widened.back() == -7.0f);
  }
#else
  WARN("this build has no padded grid (it needs AVX-512)");
#endif
}

namespace {

// Every bf16 grid pass of test::kGridCases against f32 and f64: widened passes bit for bit, pair
// passes (where conv2d_grid_bf16_pairs) within the bf16 rounding of f64.
void check_bf16_grid_passes() {
  Generator gen(91);
  for (size_t i = 0; i < std::size(test::kGridCases); ++i) {
    const test::GridCase& c = test::kGridCases[i];
    INFO("case " << i << ": " << c.in << " -> " << c.out << " channels in " << c.groups << " groups");
    auto bf16 = [](const Tensor& t) { return t.to(DType::bf16); };
    auto widened = [](const Tensor& t) { return t.to(DType::f32); };
    const Tensor x = bf16(randn({c.batch, c.in, c.h, c.w}, {}, &gen));
    const Tensor w = bf16(randn({c.out, c.in / c.groups, c.kernel, c.kernel}, {}, &gen));
    const Tensor b = c.bias ? bf16(randn({c.out}, {}, &gen)) : Tensor();
    const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), c.stride, c.pad, c.dilation, c.groups);
    const bool strided = c.stride.h > 1 || c.stride.w > 1;
    if (!cpu::conv2d_grid_takes(DType::bf16)) {
      WARN("this build's grid takes no bf16 (it needs AVX-512 with BW and VL); only the values are checked");
    } else {
      CHECK(cpu::conv2d_direct_forward_suits(g, DType::bf16, c.act));
      CHECK(cpu::conv2d_grid_forward_suits(g, DType::bf16));
      CHECK(cpu::conv2d_grid_weight_grad_suits(g, DType::bf16) == cpu::conv2d_grid_weight_grad_suits(g, DType::f32));
      CHECK(cpu::conv2d_direct_input_grad_suits(g, DType::bf16) == cpu::conv2d_direct_input_grad_suits(g, DType::f32));
      CHECK(cpu::conv2d_grid_input_grad_suits(g, DType::bf16) == strided);
    }
    // The widened passes' bits, or (pairs) within the bf16 rounding of the f64 result.
    auto check_pass = [&](bool on_pairs, const Tensor& got, const Tensor& f32_result, const Tensor& f64_result) {
      CHECK(got.dtype() == DType::bf16);
      if (!on_pairs) CHECK(same_values(got, bf16(f32_result)));
      else test::check_close(got.to(DType::f64), f64_result, 1.0 / 256, 1e-4);
    };
    const bool pairs = cpu::conv2d_grid_bf16_pairs();
    auto f64 = [](const Tensor& t) { return t.defined() ? t.to(DType::f64) : Tensor(); };
    const Tensor y = conv2d(x, w, b, c.stride, c.pad, c.dilation, c.groups, c.act);
    const Tensor y32 = conv2d(widened(x), widened(w), b.defined() ? widened(b) : Tensor(), c.stride, c.pad, c.dilation,
                              c.groups, c.act);
    check_pass(pairs, y, y32, conv2d(f64(x), f64(w), f64(b), c.stride, c.pad, c.dilation, c.groups, c.act));

    const Tensor dy = bf16(randn(y.shape(), {}, &gen));
    const Tensor dx = conv2d_input_grad(dy, w, x.shape(), c.stride, c.pad, c.dilation, c.groups);
    const Tensor dx32 = conv2d_input_grad(widened(dy), widened(w), x.shape(), c.stride, c.pad, c.dilation, c.groups);
    // A strided input gradient runs phase forwards on the widened grid (Note [Strided input gradient
    // as phase forwards]); a stride-1 one is a forward, on pairs where the forward is.
    check_pass(pairs && !strided, dx, dx32,
               conv2d_input_grad(f64(dy), f64(w), x.shape(), c.stride, c.pad, c.dilation, c.groups));

    // The weight gradient pairs positions where the forward pairs channels (Note [bf16 weight
    // gradient on position pairs]).
    const Tensor dw = conv2d_weight_grad(x, dy, w.shape(), c.stride, c.pad, c.dilation, c.groups);
    const Tensor dw32 = conv2d_weight_grad(widened(x), widened(dy), w.shape(), c.stride, c.pad, c.dilation, c.groups);
    const bool dw_on_grid = cpu::conv2d_grid_weight_grad_suits(g, DType::bf16);
    check_pass(pairs && dw_on_grid, dw, dw32,
               conv2d_weight_grad(f64(x), f64(dy), w.shape(), c.stride, c.pad, c.dilation, c.groups));
  }
}

}  // namespace

TEST_CASE("conv2d's bf16 padded-grid passes match f32 on widened tensors (pairs where vdpbf16ps is fast)",
          "[conv][bf16]") {
  check_bf16_grid_passes();
}

// EMBER_BF16_GEMM=widened widens the grid too: on a CPU whose vdpbf16ps outruns the FMA, this is
// the only test of the widened bf16 passes. The choice is made once per process, and CTest runs
// each test case in a process of its own; run with others in one process, the case may find it
// made already and says so.
TEST_CASE("conv2d's bf16 padded-grid passes with EMBER_BF16_GEMM=widened give the f32 passes' bits", "[conv][bf16]") {
  setenv("EMBER_BF16_GEMM", "widened", 1);
  const bool pairs = cpu::conv2d_grid_bf16_pairs();
  unsetenv("EMBER_BF16_GEMM");
  if (pairs) {
    WARN("this process chose the bf16 grid's form before the test set EMBER_BF16_GEMM; run this case alone");
    return;
  }
  check_bf16_grid_passes();
}

// f16 too (Note [f16 on the grid] in ops/cpu/conv_grid_tiles_avx512.h).
TEST_CASE("conv2d's bf16 and f16 padded-grid forwards carry NaN and infinity as the f32 one does", "[conv][bf16]") {
  Tensor x = zeros({1, 8, 6, 6});
  x.narrow(1, 0, 1).narrow(2, 2, 1).narrow(3, 2, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  x.narrow(1, 1, 1).narrow(2, 5, 1).narrow(3, 5, 1).fill_(std::numeric_limits<double>::infinity());
  const Tensor w = ones({8, 8, 3, 3});
  const Tensor y32 = conv2d(x, w, {}, 1, 1).to(DType::f64).contiguous();
  for (DType dtype : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dtype));
    const Tensor y16 = conv2d(x.to(dtype), w.to(dtype), {}, 1, 1).to(DType::f64).contiguous();
    const double* a = y32.data<double>();
    const double* b = y16.data<double>();
    int64_t nans = 0, infinities = 0;
    for (int64_t i = 0; i < y32.numel(); ++i) {
      INFO("output " << i << ": f32 " << a[i] << ", 16-bit " << b[i]);
      CHECK(std::isnan(a[i]) == std::isnan(b[i]));
      if (!std::isnan(a[i])) CHECK(a[i] == b[i]);
      nans += std::isnan(a[i]);
      infinities += std::isinf(a[i]);
    }
    CHECK(nans == 8 * 9);        // every output channel, the 3 x 3 around the NaN
    CHECK(infinities == 8 * 4);  // the 2 x 2 in the corner around the infinity
  }
}

// conv2d_algorithm names what each dtype runs (`bench kernels` prints it beside bf16 rows): groups
// of 4 output channels at stride 1 take the row kernel in f32 but the grid in bf16 (Note [bf16 on
// the grid]); the scalar direct input gradient of 3 channels per group is f32's only (Note [bf16
// convolution]); f16 takes the grid where f32 does and otherwise runs widened to f32, so it runs
// f32's algorithms (Note [f16 on the grid]).
TEST_CASE("conv2d_algorithm names the path of the dtype asked for", "[conv][direct]") {
  const Conv2dGeometry g = conv2d_geometry({2, 8, 10, 10}, {8, 4, 3, 3}, 1, 1, 1, 2);
  if (!cpu::conv2d_direct_forward_suits(g, DType::f32, Activation::none)) {
    WARN("this build's CPU path has no padded grid (it needs AVX-512); nothing to name");
    return;
  }
  auto name = [](const Conv2dGeometry& geometry, cpu::ConvPass pass, DType dtype) {
    return std::string(cpu::conv2d_algorithm(geometry, pass, dtype));
  };
  CHECK(name(g, cpu::ConvPass::forward, DType::f32) == "direct");
  CHECK(std::string(cpu::conv2d_algorithm(g, cpu::ConvPass::forward)) == "direct");  // f32 by default
  if (cpu::conv2d_grid_takes(DType::bf16)) CHECK(name(g, cpu::ConvPass::forward, DType::bf16) == "padded grid");
  const Conv2dGeometry three = conv2d_geometry({2, 6, 20, 20}, {6, 3, 3, 3}, 1, 1, 1, 2);
  CHECK(name(three, cpu::ConvPass::input_grad, DType::f32) == "direct");
  CHECK(name(three, cpu::ConvPass::input_grad, DType::bf16) == "gemm+col2im");
  for (const Conv2dGeometry& geometry : {g, three})
    for (cpu::ConvPass pass : {cpu::ConvPass::forward, cpu::ConvPass::input_grad, cpu::ConvPass::weight_grad})
      CHECK(name(geometry, pass, DType::f16) == name(geometry, pass, DType::f32));
}
