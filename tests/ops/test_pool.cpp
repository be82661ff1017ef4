// max_pool2d, avg_pool2d, adaptive_avg_pool2d beyond the op table (tests/ops/test_op_table.cpp
// has their PyTorch values, gradients, gradchecks and non-contiguous inputs): max_pool2d's
// indices against PyTorch, hand-checked values, NaN and padding, overlapping windows, the CPU's
// window offsets and its passes in registers against pooling by definition and the scatter, errors.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ember.h"
#include "ops/kernels.h"
#include "support/test_support.h"

using namespace ember;
using ember::test::error_of;

// max_pool2d's indices against PyTorch's, for the max_pool2d cases of the op table (which checks
// their values and gradients); make_fixtures.py stores them as "<case>/indices".
TEST_CASE("max_pool2d indices match PyTorch", "[pool]") {
  const test::Fixtures fx("ops_fixtures.safetensors");
  struct Case {
    const char* name;
    IntPair kernel, stride, padding;
  };
  for (const Case& c : {Case{"max_pool2d", 2, 2, 0}, Case{"max_pool2d_pad", 3, 2, 1},
                        Case{"max_pool2d_nonsquare", {2, 3}, {1, 2}, 1}}) {
    INFO(c.name);
    auto [values, indices] = max_pool2d_with_indices(fx.get(std::string(c.name) + "/in0"), c.kernel, c.stride, c.padding);
    REQUIRE(indices.dtype() == DType::i64);
    CHECK_THAT(indices, test::all_close(fx.get(std::string(c.name) + "/indices"), 0, 0));
  }
}

TEST_CASE("pooling by hand on a 4x4 plane", "[pool]") {
  Tensor x = arange(16.0).reshape({1, 1, 4, 4});  // rows 0..3, 4..7, 8..11, 12..15
  auto [m, idx] = max_pool2d_with_indices(x, 2);
  REQUIRE(m.to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  REQUIRE(idx.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  REQUIRE(avg_pool2d(x, 2).to_vector<float>() == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  // 3x3 windows, stride 2, padding 1: the corner window holds {0, 1, 4, 5} and 5 padding cells.
  REQUIRE(avg_pool2d(x, 3, 2, 1, true).to_vector<float>()[0] == 10.0f / 9.0f);
  REQUIRE(avg_pool2d(x, 3, 2, 1, false).to_vector<float>()[0] == 2.5f);
  REQUIRE(adaptive_avg_pool2d(x, 1).to_vector<float>() == std::vector<float>{7.5f});
  // A 3-D (C, H, W) input keeps its rank.
  REQUIRE(max_pool2d(x.reshape({1, 4, 4}), 2).shape() == Shape{1, 2, 2});
}

// Note [Window sums] in ops/cpu/window_sums.h: planes of 32 values and more are summed in lanes. The
// sizes straddle the lane count and leave every tail length; the reference sums in f64.
TEST_CASE("adaptive_avg_pool2d: global averages of long planes in lanes match an f64 sum", "[pool]") {
  Generator gen(7);
  for (int64_t side : {5, 6, 7, 9, 14, 56}) {
    INFO("plane " << side << " x " << side);
    const Tensor x = add(randn({2, 3, side, side}, {}, &gen), 1.0);  // a mean away from 0
    const Tensor expected = mean(x.to(DType::f64), {2, 3}, true).to(DType::f32);
    CHECK_THAT(adaptive_avg_pool2d(x, 1), test::all_close(expected, 1e-6, 1e-6));
    // The lanes' order is fixed: one thread gives the bits of two.
    const int threads = num_threads();
    set_num_threads(1);
    const Tensor one_thread = adaptive_avg_pool2d(x, 1);
    set_num_threads(2);
    const Tensor two_threads = adaptive_avg_pool2d(x, 1);
    set_num_threads(threads);
    CHECK_THAT(one_thread, test::all_close(two_threads, 0, 0));
  }
  // Windows narrower than the plane (two columns of output) keep the row-by-row sum.
  const Tensor x = randn({1, 2, 40, 40}, {}, &gen);
  const Tensor expected = adaptive_avg_pool2d(x.to(DType::f64), {1, 2}).to(DType::f32);
  CHECK_THAT(adaptive_avg_pool2d(x, {1, 2}), test::all_close(expected, 1e-6, 1e-6));
}

TEST_CASE("max_pool2d: NaN wins its window, padding never does", "[pool]") {
  Tensor x = full({1, 1, 2, 2}, -1e30);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  auto [m, idx] = max_pool2d_with_indices(x, 2);
  REQUIRE(std::isnan(m.item()));
  REQUIRE(idx.item() == 3.0);
  // With padding 1 and all inputs -inf the maximum is -inf at a real cell, not a padding cell.
  Tensor y = full({1, 1, 2, 2}, -std::numeric_limits<double>::infinity());
  auto [v, i] = max_pool2d_with_indices(y, 2, 1, 1);
  for (int64_t index : i.to_vector<int64_t>()) REQUIRE((index >= 0 && index < 4));
  REQUIRE(std::isinf(v.to_vector<float>()[0]));
}

TEST_CASE("max_pool2d backward sums the gradients of overlapping windows", "[pool]") {
  // 3x3 windows with stride 1 over a plane whose maximum is in the middle: all four windows pick it.
  Tensor x = tensor<float>({0, 1, 0, 0, 1, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {1, 1, 4, 4}).requires_grad_();
  sum(max_pool2d(x, 3, 1)).backward();
  REQUIRE(x.grad().to_vector<float>()[5] == 4.0f);
  REQUIRE(sum(x.grad()).item() == 4.0);
}

namespace {
// Max pooling by definition (no padding): each window scanned row by row, a later value wins if it
// is greater or NaN; the backward adds each window's gradient at its maximum. In double.
struct NaivePool {
  std::vector<double> values, grad_in;
  std::vector<int64_t> indices;
};
NaivePool naive_max_pool(const Tensor& x, const Tensor& dy, int64_t k, int64_t stride) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = (H - k) / stride + 1, Wo = (W - k) / stride + 1;
  const std::vector<double> in = x.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> g = dy.to(DType::f64).contiguous().to_vector<double>();
  NaivePool r{{}, std::vector<double>(in.size(), 0.0), {}};
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t arg = (oh * stride) * W + ow * stride;
        double best = in[p * H * W + arg];
        for (int64_t h = oh * stride; h < oh * stride + k; ++h)
          for (int64_t w = ow * stride; w < ow * stride + k; ++w) {
            const double v = in[p * H * W + h * W + w];
            if (v > best || std::isnan(v)) best = v, arg = h * W + w;
          }
        r.values.push_back(best);
        r.indices.push_back(arg);
        r.grad_in[p * H * W + arg] += g[(p * Ho + oh) * Wo + ow];
      }
  return r;
}

// Values with many ties, NaNs and infinities, so that the scan order and the NaN rule matter.
Tensor tie_heavy(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randint(-3, 4, shape, {.dtype = DType::i64}, &gen).to(DType::f32);
  float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 37) v[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 5; i < x.numel(); i += 53) v[i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = 11; i < x.numel(); i += 59) v[i] = std::numeric_limits<float>::infinity();
  return x;
}

// The bits of a contiguous bf16 or f16 tensor's elements, and setting them.
std::vector<uint16_t> bits_of(const Tensor& t) {
  std::vector<uint16_t> bits(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    bits[size_t(i)] = t.dtype() == DType::bf16 ? t.data<BFloat16>()[i].bits : t.data<Half>()[i].bits;
  return bits;
}
void set_bits(const Tensor& t, const std::vector<uint16_t>& bits) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.dtype() == DType::bf16) t.data<BFloat16>()[i].bits = bits[size_t(i)];
    else t.data<Half>()[i].bits = bits[size_t(i)];
}
// A NaN's bits with payload i: the exponent all ones and a nonzero fraction.
uint16_t nan_bits(DType dt, size_t i) {
  return dt == DType::bf16 ? uint16_t(0x7F80 | (i % 127 + 1)) : uint16_t(0x7C00 | (i % 1023 + 1));
}

// Every element's bits equal (f32, bf16 or f16 tensors of one dtype, contiguous).
void check_same_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  if (got.dtype() != DType::f32) {
    CHECK(bits_of(got) == bits_of(want));
    return;
  }
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": " << g[i] << " against " << w[i]);
    REQUIRE(std::bit_cast<uint32_t>(g[i]) == std::bit_cast<uint32_t>(w[i]));
  }
}

void check_same(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else CHECK(got[i] == want[i]);
  }
}
}  // namespace

// Note [Max pool in blocks] and [Native 16-bit max pooling]: the 2x2 stride-2 pass works on
// blocks of 16 outputs, a row's last partial block under masks (widths 37, 32 and 9 here give
// whole blocks, partial ones and both; odd sizes leave a last row and column in no window), and
// bf16 / f16 pool without widening. Note [Max pool 2x2 in registers] (max_pool2d's window
// offsets, f32 and 16-bit; the f32 backward only on rows under 16 outputs): rows of 8 outputs or
// fewer go in pairs, across planes where H is even (7 rows a plane: 14x14; 3: 6x9; 2 rows of 8:
// 4x16; one row of 1: 2x3; a run of planes split between the two threads' tasks after an odd
// number of rows: 16x16x14x14), within a plane where it is odd (7x17); rows of 9 or more in
// blocks of 8 + 8 (28x28: 8 + 6; 50: 16 + 8 + 1). Every dtype's values,
// indices and input gradient equal pooling by definition; the gradient of the non-overlapping
// 3x3 stride-3 windows is native in 16 bits too, the overlapping 3x3 stride-2 one widens.
TEST_CASE("max_pool2d: blocked 2x2 and native 16-bit passes equal pooling by definition", "[pool][f16]") {
  struct Case {
    int64_t k, stride;
  };
  struct TwoThreads {  // restored however the test case ends
    int previous = num_threads();
    TwoThreads() { set_num_threads(2); }
    ~TwoThreads() { set_num_threads(previous); }
  } two_threads;
  for (const Shape& shape : {Shape{2, 3, 9, 37}, Shape{1, 2, 4, 32}, Shape{1, 2, 6, 9}, Shape{3, 5, 14, 14},
                             Shape{2, 3, 7, 17}, Shape{1, 3, 2, 2}, Shape{2, 2, 28, 28}, Shape{1, 1, 5, 50},
                             Shape{2, 3, 4, 16}, Shape{1, 2, 2, 3}, Shape{16, 16, 14, 14}}) {
    for (Case c : {Case{2, 2}, Case{3, 3}, Case{3, 2}}) {
      if (c.k > shape[2]) continue;
      const Tensor x32 = tie_heavy(shape, uint64_t(shape[3] * 10 + c.k * 3 + c.stride));
      for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
        INFO(shape_str(shape) << " kernel " << c.k << " stride " << c.stride << " " << dtype_name(dt));
        const Tensor x = x32.to(dt).detach().requires_grad_();
        auto [y, indices] = max_pool2d_with_indices(x, c.k, c.stride);
        Generator gen(7);
        const Tensor dy = randint(-8, 9, y.shape(), {.dtype = DType::i64}, &gen).to(dt);  // exact in every dtype
        const NaivePool want = naive_max_pool(x.detach(), dy, c.k, c.stride);
        CHECK(y.dtype() == dt);
        check_same(y.to(DType::f64).contiguous().to_vector<double>(), want.values);
        CHECK(indices.to_vector<int64_t>() == want.indices);
        y.backward(dy);
        CHECK(x.grad().dtype() == dt);
        check_same(x.grad().to(DType::f64).contiguous().to_vector<double>(), want.grad_in);
        // max_pool2d alone saves window offsets (Note [Max pool window offsets]).
        const Tensor x2 = x.detach().requires_grad_();
        const Tensor y2 = max_pool2d(x2, c.k, c.stride);
        check_same(y2.to(DType::f64).contiguous().to_vector<double>(), want.values);
        y2.backward(dy);
        check_same(x2.grad().to(DType::f64).contiguous().to_vector<double>(), want.grad_in);
      }
    }
  }
}

// Note [Max pool by lanes]: windows other than 2x2 stride 2 run 16 outputs at a time on AVX-512
// (f32, bf16 and f16); f64 keeps the scalar scan. Both must pick the same cells, padded windows
// (where the first cell inside a window is its initial position) and rows of one partial block, two
// whole ones and a partial third included: values, i64 plane indices, and the gradient from
// max_pool2d's u8 window offsets. Strides 1 and 2 (loads) and 3 (gathers), padded or not, 1 to 7
// taps a row. Note [Separable max pool] folds rows, then the rows' results: rows of 300 take
// several passes of blocks (Note [Max pool rows in order]), a NaN in every third cell puts NaN in
// several rows of a window and twice in a row of the wider ones, and a window of 18 rows is past
// the ring of rows and keeps the scalar scan.
TEST_CASE("max_pool2d: windows in lanes equal the f64 scan, and keep 16-bit inputs' bits", "[pool]") {
  struct Case {
    IntPair kernel, stride, padding;
  };
  struct Input {
    Shape shape;
    int64_t nan_every;  // 0: tie_heavy's NaN alone
  };
  for (const Input& input : {Input{{2, 3, 11, 13}, 0}, Input{{1, 2, 9, 70}, 0}, Input{{1, 1, 5, 32}, 0},
                             Input{{1, 2, 19, 300}, 0}, Input{{1, 1, 19, 300}, 3}}) {
    const Shape& xs = input.shape;
    Tensor x = tie_heavy(xs, uint64_t(xs[3]));
    for (int64_t i = 1; input.nan_every > 0 && i < x.numel(); i += input.nan_every)
      x.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    std::vector<Case> cases{Case{3, 2, 1}, Case{3, 1, 1}, Case{{2, 3}, {1, 2}, 1}, Case{{5, 4}, {3, 2}, 2},
                            Case{1, 1, 0}, Case{3, 3, 0}, Case{3, 3, 1}, Case{{3, 5}, {2, 3}, {1, 2}},
                            Case{{2, 7}, 1, {1, 3}}};
    if (xs[2] >= 18) {  // the ring of 16 rows wrapping under 16-row windows, 16-wide windows, 18 rows: the scan
      cases.push_back(Case{{16, 3}, {1, 2}, {8, 1}});
      cases.push_back(Case{{3, 16}, 1, {1, 8}});
      cases.push_back(Case{{18, 3}, {1, 2}, {0, 1}});
    }
    for (Case c : cases) {
      INFO(shape_str(xs) << " NaN every " << input.nan_every << " kernel " << c.kernel.h << "x" << c.kernel.w
                         << " stride " << c.stride.h << "x" << c.stride.w << " padding " << c.padding.h << "x"
                         << c.padding.w);
      const Tensor x32 = x.detach().requires_grad_(), x64 = x.to(DType::f64).detach().requires_grad_();
      auto [y32, i32] = max_pool2d_with_indices(x32, c.kernel, c.stride, c.padding);
      auto [y64, i64] = max_pool2d_with_indices(x64.detach(), c.kernel, c.stride, c.padding);
      check_same(y32.to(DType::f64).contiguous().to_vector<double>(), y64.contiguous().to_vector<double>());
      CHECK(i32.to_vector<int64_t>() == i64.to_vector<int64_t>());
      Generator gen(9);
      const Tensor dy = randint(-8, 9, y32.shape(), {.dtype = DType::i64}, &gen).to(DType::f32);
      max_pool2d(x32, c.kernel, c.stride, c.padding).backward(dy);
      max_pool2d(x64, c.kernel, c.stride, c.padding).backward(dy.to(DType::f64));
      check_same(x32.grad().to(DType::f64).contiguous().to_vector<double>(),
                 x64.grad().contiguous().to_vector<double>());
      // bf16 and f16 (in lanes at strides 1 and 2, the scalar scan at 3): the f64 scan's cells on
      // the same values (tie_heavy's are exact in 16 bits), each output the bits of the input it
      // names, NaN payloads and signalling NaN included, and the gradient from max_pool2d's u8
      // window offsets (the training path) the f64 one rounded to dt.
      for (DType dt : {DType::bf16, DType::f16}) {
        INFO(dtype_name(dt));
        const Tensor x16 = x.to(dt);
        std::vector<uint16_t> in = bits_of(x16);
        for (size_t i = 0; i < in.size(); ++i)  // 0x7F81.. / 0x7C01..: signalling where the quiet bit is 0
          if (std::isnan(x.data<float>()[i])) in[i] = uint16_t((i % 2 ? 0x8000 : 0) | nan_bits(dt, i));
        set_bits(x16, in);
        auto [y16, i16] = max_pool2d_with_indices(x16, c.kernel, c.stride, c.padding);
        const std::vector<int64_t> at = i16.to_vector<int64_t>();
        CHECK(at == i64.to_vector<int64_t>());
        const Tensor a = x16.detach().requires_grad_();
        max_pool2d(a, c.kernel, c.stride, c.padding).backward(dy.to(dt));
        check_same(a.grad().to(DType::f64).contiguous().to_vector<double>(),  // sums rounded once to dt
                   x64.grad().to(dt).to(DType::f64).contiguous().to_vector<double>());
        const std::vector<uint16_t> out = bits_of(y16);
        const int64_t out_plane = y16.size(2) * y16.size(3), in_plane = xs[2] * xs[3];
        for (size_t o = 0; o < out.size(); ++o) {
          INFO("output " << o);
          REQUIRE(out[o] == in[size_t(int64_t(o) / out_plane * in_plane + at[o])]);
        }
      }
    }
  }
}

// Note [Native 16-bit average pooling]: bf16 and f16 planes are averaged without widening them
// first, and give the bits of widening, pooling in f32 and rounding: global averages in lanes
// (tails of 0 to 9 values), windows of whole rows (64 -> 2 x 1) and narrower than the plane,
// overlapping adaptive windows, more outputs than inputs (3 -> 5), and values that round (randn; a
// NaN and infinities too). The backward is native where the windows partition the plane (global,
// 64 -> 2 x 1, 40 -> 1 x 2, 7 -> 7) and widened where they overlap (13 -> 5 x 3, 3 -> 5), with the
// same bits either way (-0 gradients too); the CPU kernels are also called on 16-bit tensors
// directly, and the backward refuses overlapping windows, which it would round at every add.
TEST_CASE("adaptive_avg_pool2d: bf16 and f16 planes give the bits of pooling widened", "[pool][f16]") {
  Generator gen(11);
  struct Case {
    int64_t side;
    IntPair out;
  };
  for (Case c : {Case{5, 1}, Case{6, 1}, Case{7, 1}, Case{9, 1}, Case{11, 1}, Case{14, 1}, Case{56, 1},
                 Case{64, {2, 1}}, Case{40, {1, 2}}, Case{13, {5, 3}}, Case{3, 5}, Case{7, 7}}) {
    Tensor x = randn({2, 3, c.side, c.side}, {}, &gen);
    x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    x.data<float>()[x.numel() - 1] = std::numeric_limits<float>::infinity();
    x.data<float>()[x.numel() / 2] = -std::numeric_limits<float>::infinity();
    for (DType dt : {DType::bf16, DType::f16}) {
      INFO(c.side << " x " << c.side << " -> " << c.out.h << " x " << c.out.w << " " << dtype_name(dt));
      const Tensor x16 = x.to(dt);
      const Tensor got = adaptive_avg_pool2d(x16, c.out);
      CHECK(got.dtype() == dt);
      CHECK(bits_of(got) == bits_of(adaptive_avg_pool2d(x16.to(DType::f32), c.out).to(dt)));
      Tensor dy32 = randn(got.shape(), {}, &gen);
      dy32.data<float>()[0] = -0.0f;
      const Tensor dy = dy32.to(dt), a = x16.detach().requires_grad_(), b = x16.to(DType::f32).requires_grad_();
      adaptive_avg_pool2d(a, c.out).backward(dy);
      adaptive_avg_pool2d(b, c.out).backward(dy.to(DType::f32));
      CHECK(a.grad().dtype() == dt);
      CHECK(bits_of(a.grad()) == bits_of(b.grad().to(dt)));
      // The kernels themselves on 16-bit tensors (the op might widen and still pass the above).
      const Tensor y16 = Tensor::empty(got.shape(), {.dtype = dt});
      cpu::adaptive_avg_pool2d_forward(x16, y16);
      CHECK(bits_of(y16) == bits_of(got));
      if (cpu::adaptive_windows_partition(c.side, c.side, c.out.h, c.out.w)) {
        // Input 0 is window 0's alone: +0 + its -0 share is +0, as the f32 adds (and PyTorch's) give.
        CHECK(std::bit_cast<uint32_t>(b.grad().to_vector<float>()[0]) == 0u);
        const Tensor dx16 = full(x16.shape(), std::numeric_limits<double>::quiet_NaN(), {.dtype = dt});
        cpu::adaptive_avg_pool2d_backward(dy, dx16);
        CHECK(bits_of(dx16) == bits_of(a.grad()));
      }
    }
  }
  const Tensor dy = ones({1, 1, 5, 3}, {.dtype = DType::bf16});
  const Tensor dx = Tensor::empty({1, 1, 13, 13}, {.dtype = DType::bf16});
  CHECK_THAT(error_of([&] { cpu::adaptive_avg_pool2d_backward(dy, dx); }),
             Catch::Contains("adaptive_avg_pool2d_backward") && Catch::Contains("bf16") &&
                 Catch::Contains("13x13 into 5x3"));
}

// Note [Max pool 3x3 backward by rows]: the stem's 3x3 stride-2 windows with padding 1 take their
// gradient from u8 window offsets a row of input at a time, and nothing clears dx first. In f32 it
// must have the bits of the scatter that plane indices take (adds in output order from +0), and in
// bf16 and f16 those of that f32 scatter rounded once, so the gradients here are not exact in any
// order: randn, with -0 and NaNs among them. Ties make neighbouring windows pick the same cell
// (two and four windows share the odd rows' and columns' cells). The kernel also writes into a dx
// full of NaN, so a cell it skipped would show. Shapes: one cell; 2 rows and 3 columns (the last
// window's right column outside); 3 x 2 (the last output row's bottom row outside); 17 outputs a
// row (a block of 16 and one of 1), 32 (two whole blocks), 31 outputs of a 61-wide row; several
// planes per task. (The 16-bit roundings themselves: tests/ops/test_float16_lanes.cpp.)
TEST_CASE("max_pool2d: the 3x3 stride-2 backward by rows has the f32 scatter's bits", "[pool]") {
  for (const Shape& xs : {Shape{1, 1, 1, 1}, Shape{1, 2, 2, 3}, Shape{1, 2, 3, 2}, Shape{2, 3, 5, 33},
                          Shape{1, 1, 6, 64}, Shape{1, 2, 7, 61}, Shape{2, 2, 24, 40}}) {
    const Tensor x32 = tie_heavy(xs, uint64_t(xs[2] * 100 + xs[3]));
    const Pool2dGeometry g = pool2d_geometry(xs, 3, 2, 1, "max_pool2d");
    Generator gen{uint64_t(xs[3])};
    Tensor dy = randn({xs[0], xs[1], g.out_h, g.out_w}, {}, &gen);
    for (int64_t i = 0; i < dy.numel(); i += 7) dy.data<float>()[i] = -0.0f;
    for (int64_t i = 3; i < dy.numel(); i += 29) dy.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      INFO(shape_str(xs) << " " << dtype_name(dt));
      const Tensor dy_dt = dy.to(dt), a = x32.to(dt).detach().requires_grad_();
      max_pool2d(a, 3, 2, 1).backward(dy_dt);
      const Tensor b = x32.detach().requires_grad_();  // i64 plane indices: the scatter, in f32
      max_pool2d_with_indices(b, 3, 2, 1).values.backward(dy_dt.to(DType::f32));
      const Tensor want = b.grad().to(dt);
      check_same_bits(a.grad(), want);
      // The kernel alone, into a dx of NaN (16-bit: where it sums in f32, as on AVX-512 builds).
      if (dt != DType::f32 && !cpu::max_pool2d_backward_sums_in_f32(g, dt, DType::u8)) continue;
      const Tensor offsets = Tensor::empty(dy.shape(), {.dtype = DType::u8});
      cpu::max_pool2d_forward(g, x32.to(dt), Tensor::empty(dy.shape(), {.dtype = dt}), offsets);
      const Tensor dx = full(xs, std::numeric_limits<double>::quiet_NaN(), {.dtype = dt});
      cpu::max_pool2d_backward(g, dy_dt, offsets, dx);
      check_same_bits(dx, want);
    }
  }
  // A cell four windows picked, with gradients whose sum depends on the order: the scatter's
  // ((1 + 1e-8) - 1) + 1e-8 is 1e-8 in f32, where other orders give 0 or 2e-8.
  Tensor x = zeros({1, 1, 5, 5});
  x.data<float>()[1 * 5 + 1] = 9;  // row 1, column 1: in the windows of outputs (0, 0), (0, 1), (1, 0), (1, 1)
  Tensor dy = zeros({1, 1, 3, 3});
  for (auto [i, v] : {std::pair{0, 1.0f}, std::pair{1, 1e-8f}, std::pair{3, -1.0f}, std::pair{4, 1e-8f}})
    dy.data<float>()[i] = v;
  const Tensor a = x.detach().requires_grad_();
  max_pool2d(a, 3, 2, 1).backward(dy);
  CHECK(a.grad().to_vector<float>()[6] == 1e-8f);
}

// Note [Max pool window offsets]: on the CPU the kernels take u8 offsets inside the window as well
// as i64 plane indices. Both encodings name the same cell for padded, overlapping, non-square and
// 2x2 windows, and the gradient that max_pool2d's node computes from its offsets equals the one
// from max_pool2d_with_indices' i64 indices; a window of more than 256 cells keeps i64 indices.
TEST_CASE("max_pool2d: window offsets and plane indices name the same maxima", "[pool]") {
  struct Case {
    IntPair kernel, stride, padding;
  };
  const Shape xs{2, 3, 11, 13};
  const Tensor x = tie_heavy(xs, 11);
  for (Case c : {Case{2, 2, 0}, Case{3, 2, 1}, Case{3, 1, 1}, Case{{2, 3}, {1, 2}, 1}, Case{{5, 4}, {3, 2}, 2},
                 Case{{11, 13}, 1, 0}}) {
    INFO("kernel " << c.kernel.h << "x" << c.kernel.w << " stride " << c.stride.h << "x" << c.stride.w << " padding "
                   << c.padding.h << "x" << c.padding.w);
    const Pool2dGeometry g = pool2d_geometry(xs, c.kernel, c.stride, c.padding, "max_pool2d");
    const Shape ys{xs[0], xs[1], g.out_h, g.out_w};
    Tensor y_index = Tensor::empty(ys), y_offset = Tensor::empty(ys);
    Tensor index = Tensor::empty(ys, {.dtype = DType::i64}), offset = Tensor::empty(ys, {.dtype = DType::u8});
    cpu::max_pool2d_forward(g, x, y_index, index);
    cpu::max_pool2d_forward(g, x, y_offset, offset);
    check_same(y_offset.to(DType::f64).to_vector<double>(), y_index.to(DType::f64).to_vector<double>());
    const std::vector<int64_t> flat = index.to_vector<int64_t>();
    const std::vector<int64_t> in_window = offset.to(DType::i64).to_vector<int64_t>();
    for (size_t i = 0; i < flat.size(); ++i) {
      const int64_t ow = int64_t(i) % g.out_w, oh = int64_t(i) / g.out_w % g.out_h;
      const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
      INFO("output " << i);
      REQUIRE(flat[i] == (h0 + in_window[i] / g.kernel_w) * g.in_w + w0 + in_window[i] % g.kernel_w);
    }
    Generator gen(3);
    const Tensor dy = randint(-8, 9, ys, {.dtype = DType::i64}, &gen).to(DType::f32);
    const Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
    max_pool2d(a, c.kernel, c.stride, c.padding).backward(dy);
    max_pool2d_with_indices(b, c.kernel, c.stride, c.padding).values.backward(dy);
    check_same(a.grad().to(DType::f64).to_vector<double>(), b.grad().to(DType::f64).to_vector<double>());
  }
  // The largest offsets a byte holds: a 16 x 16 window (256 cells) whose maximum is its last
  // cell (offset 255) in one plane and cell 200 in the other.
  {
    Tensor x16 = full({1, 2, 16, 16}, -1.0);
    x16.data<float>()[255] = 5.0f;
    x16.data<float>()[256 + 200] = 5.0f;
    const Pool2dGeometry g16 = pool2d_geometry(x16.shape(), 16, {}, 0, "max_pool2d");
    Tensor y16 = Tensor::empty({1, 2, 1, 1}), offsets = Tensor::empty({1, 2, 1, 1}, {.dtype = DType::u8});
    cpu::max_pool2d_forward(g16, x16, y16, offsets);
    CHECK(offsets.to(DType::i64).to_vector<int64_t>() == std::vector<int64_t>{255, 200});
    const Tensor a = x16.detach().requires_grad_();
    sum(max_pool2d(a, 16)).backward();
    CHECK(a.grad().to_vector<float>()[255] == 1.0f);
    CHECK(a.grad().to_vector<float>()[256 + 200] == 1.0f);
    CHECK(sum(a.grad()).item() == 2.0);
  }
  // 17 x 17 = 289 cells: max_pool2d keeps plane indices, and the kernels refuse u8 offsets.
  const Tensor big = tie_heavy({1, 2, 17, 17}, 5).requires_grad_(), big_i64 = big.detach().requires_grad_();
  sum(max_pool2d(big, 17)).backward();
  sum(max_pool2d_with_indices(big_i64, 17).values).backward();
  check_same(big.grad().to(DType::f64).to_vector<double>(), big_i64.grad().to(DType::f64).to_vector<double>());
  const Pool2dGeometry g = pool2d_geometry(big.shape(), 17, {}, 0, "max_pool2d");
  CHECK_THAT(error_of([&] {
               cpu::max_pool2d_forward(g, big.detach(), Tensor::empty({1, 2, 1, 1}),
                                       Tensor::empty({1, 2, 1, 1}, {.dtype = DType::u8}));
             }),
             Catch::Contains("max_pool2d") && Catch::Contains("u8") && Catch::Contains("17x17"));
}

TEST_CASE("pooling errors name the op, the expectation and the input", "[pool][errors]") {
  Tensor x = randn({1, 2, 5, 5});
  CHECK_THAT(error_of([&] { max_pool2d(randn({5, 5}), 2); }),
             Catch::Contains("max_pool2d") && Catch::Contains("rank 3") && Catch::Contains("(5, 5)"));
  CHECK_THAT(error_of([&] { max_pool2d(x, 7); }),
             Catch::Contains("kernel (7, 7)") && Catch::Contains("padded input (5, 5)"));
  CHECK_THAT(error_of([&] { avg_pool2d(x, 2, 2, 2); }), Catch::Contains("avg_pool2d") && Catch::Contains("half"));
  CHECK_THAT(error_of([&] { avg_pool2d(x, 0); }), Catch::Contains("kernel >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(x, 2, 0); }), Catch::Contains("stride >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(x.to(DType::i64), 2); }), Catch::Contains("floating"));
  CHECK_THAT(error_of([&] { adaptive_avg_pool2d(x, {0, 2}); }), Catch::Contains("output size >= 1"));
  CHECK_THAT(error_of([&] { max_pool2d(zeros({1, 2, 0, 4}), 1); }), Catch::Contains("non-empty"));
  CHECK_THAT(error_of([&] { max_pool2d_backward(randn({1, 2, 3, 3}), zeros({1, 2, 2, 2}, {.dtype = DType::i64}),
                                                x.shape(), 2); }),
             Catch::Contains("max_pool2d_backward") && Catch::Contains("(1, 2, 2, 2)"));
}
