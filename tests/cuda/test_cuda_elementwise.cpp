// The elementwise CUDA kernels (ops/cuda/elementwise.cu, transpose.cu) against the CPU ops:
// every op, broadcasting, non-contiguous operands, dtype conversions, transposed copies, and
// moves between devices. Sizes are odd so that grid-stride loops and tiles end in partial blocks.
#include "cuda_ops_support.h"
#include "ops/kernels.h"

using namespace ember;
using test::check_equal;
using test::check_matches;
using test::kCuda;
using test::Layout;
using test::on_cuda;
using Catch::Matchers::Contains;

namespace {
Generator gen(2024);
}

TEST_CASE("cuda: to(cuda) and cpu() round-trip every dtype, and values stay on the device") {
  Tensor f = randn({3, 5}, {}, &gen);
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    Tensor x = mul(f, 10.0).to(dt);
    Tensor d = x.to(kCuda);
    REQUIRE(d.is_cuda());
    REQUIRE(d.dtype() == dt);
    Tensor back = d.cpu();
    REQUIRE(back.is_cpu());
    test::check_close(back, x, 0, 0);
  }
  Tensor e = zeros({0, 4}).to(kCuda);
  CHECK(e.numel() == 0);
  CHECK(e.cpu().shape() == Shape{0, 4});
  for (const Shape& empty : {Shape{3, 0}, Shape{2, 0, 5}}) {  // a zero after the first dimension, too
    Tensor z = zeros(empty, {.dtype = DType::bf16}).to(kCuda);
    CHECK(z.cpu().shape() == empty);
  }
  CHECK(full({}, 2.5).to(kCuda).item() == 2.5);
}

TEST_CASE("cuda: unary ops equal the CPU's in f32 and f64, on every layout") {
  Tensor x = randn({7, 37}, {}, &gen);
  Tensor pos = add(abs(x), 0.1);
  const std::pair<const char*, Tensor (*)(const Tensor&)> any_sign[] = {
      {"neg", neg}, {"abs", abs}, {"sign", sign}, {"exp", exp}, {"square", square}, {"relu", relu},
      {"sigmoid", sigmoid}, {"tanh", tanh}, {"gelu", gelu}, {"softplus", softplus}};
  const std::pair<const char*, Tensor (*)(const Tensor&)> positive[] = {
      {"log", log}, {"log1p", log1p}, {"sqrt", sqrt}, {"rsqrt", rsqrt}};
  for (DType dt : {DType::f32, DType::f64}) {
    const double rtol = dt == DType::f32 ? 2e-6 : 1e-13;
    for (Layout layout : test::kLayouts) {
      INFO(dtype_name(dt) << ", " << test::layout_name(layout));
      for (auto [name, fn] : any_sign) {
        INFO(name);
        check_matches(fn(on_cuda(x.to(dt), layout)), fn(x.to(dt)), rtol, 1e-7);
      }
      for (auto [name, fn] : positive) {
        INFO(name);
        check_matches(fn(on_cuda(pos.to(dt), layout)), fn(pos.to(dt)), rtol, 1e-7);
      }
    }
  }
  Tensor b = gt(x, 0.0);
  check_equal<bool>(logical_not(on_cuda(b)), logical_not(b));
}

TEST_CASE("cuda: integer unary and binary ops equal the CPU's exactly") {
  for (DType dt : {DType::i64, DType::i32, DType::u8}) {
    INFO(dtype_name(dt));
    Tensor a = randint(0, 50, {5, 9}, {.dtype = dt == DType::u8 ? DType::i32 : dt}, &gen).to(dt);
    Tensor b = randint(1, 7, {9}, {.dtype = dt == DType::u8 ? DType::i32 : dt}, &gen).to(dt);
    Tensor da = on_cuda(a, Layout::permuted), db = on_cuda(b);
    test::check_close(neg(da), neg(a), 0, 0);
    test::check_close(abs(da), abs(a), 0, 0);
    test::check_close(square(da), square(a), 0, 0);
    test::check_close(add(da, db), add(a, b), 0, 0);
    test::check_close(mul(da, db), mul(a, b), 0, 0);
    test::check_close(div(da, db), div(a, b), 0, 0);
    test::check_close(maximum(da, db), maximum(a, b), 0, 0);
    test::check_close(pow(da, db), pow(a, b), 0, 0);
  }
  REQUIRE_THROWS_WITH(binary_kernel(kCuda, BinaryOp::gelu_backward, zeros({3}, {.dtype = DType::i64, .device = kCuda}),
                                    zeros({3}, {.dtype = DType::i64, .device = kCuda}),
                                    zeros({3}, {.dtype = DType::i64, .device = kCuda})),
                      Contains("binary: this op needs a floating dtype (f32, f64, bf16 or f16) on cuda, got i64"));
}

TEST_CASE("cuda: binary ops broadcast over non-contiguous operands") {
  Tensor a = randn({6, 1, 33}, {}, &gen), b = randn({5, 33}, {}, &gen);
  Tensor bpos = add(abs(b), 0.5);
  const std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)> ops[] = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum}};
  for (Layout layout : test::kLayouts) {
    INFO(test::layout_name(layout));
    for (auto [name, fn] : ops) {
      INFO(name);
      check_matches(fn(on_cuda(a, layout), on_cuda(bpos, Layout::strided)), fn(a, bpos));
    }
    check_matches(pow(on_cuda(bpos, layout), on_cuda(a.select(1, 0).narrow(0, 0, 5))), pow(bpos, a.select(1, 0).narrow(0, 0, 5)), 1e-5);
  }
  // f64 and the fused backward ops.
  Tensor g = randn({4, 31}, {.dtype = DType::f64}, &gen), y = randn({4, 31}, {.dtype = DType::f64}, &gen);
  for (BinaryOp op : {BinaryOp::relu_backward, BinaryOp::sigmoid_backward, BinaryOp::tanh_backward,
                      BinaryOp::gelu_backward, BinaryOp::softplus_backward}) {
    Tensor expected = empty_like(g), got = empty({4, 31}, {.dtype = DType::f64, .device = kCuda});
    binary_kernel(Device::cpu(), op, g, y, expected);
    binary_kernel(kCuda, op, on_cuda(g), on_cuda(y, Layout::permuted), got);
    check_matches(got, expected, 1e-13, 1e-15);
  }
  // In place through a broadcast operand.
  Tensor acc = randn({3, 17}, {}, &gen), row = randn({17}, {}, &gen);
  Tensor dacc = on_cuda(acc);
  dacc.add_(on_cuda(row), 2.0);
  check_matches(dacc, add(acc, mul(row, 2.0)));
}

TEST_CASE("cuda: compare and where on every dtype") {
  Tensor a = randint(-3, 3, {5, 13}, {.dtype = DType::i64}, &gen), b = randint(-3, 3, {13}, {.dtype = DType::i64}, &gen);
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    INFO(dtype_name(dt));
    Tensor x = a.to(dt), y = b.to(dt);
    Tensor dx = on_cuda(x, Layout::permuted), dy = on_cuda(y);
    check_equal<bool>(eq(dx, dy), eq(x, y));
    check_equal<bool>(ne(dx, dy), ne(x, y));
    check_equal<bool>(lt(dx, dy), lt(x, y));
    check_equal<bool>(le(dx, dy), le(x, y));
    check_equal<bool>(gt(dx, dy), gt(x, y));
    check_equal<bool>(ge(dx, dy), ge(x, y));
    Tensor cond = gt(a, 0.0);
    test::check_close(where(on_cuda(cond, Layout::strided), dx, dy), where(cond, x, y), 0, 0);
  }
  Tensor x = randn({4, 9}, {}, &gen);
  check_matches(masked_fill(on_cuda(x), on_cuda(lt(x, 0.0)), -1.0), masked_fill(x, lt(x, 0.0), -1.0));
}

TEST_CASE("cuda: copy converts between every pair of dtypes") {
  Tensor base = mul(randn({3, 11}, {}, &gen), 20.0);
  base = where(lt(base, 0.0), neg(base), base);  // non-negative, so u8 conversions are defined
  const DType dtypes[] = {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8, DType::boolean};
  for (DType from : dtypes)
    for (DType to : dtypes) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      Tensor src = base.to(from);
      Tensor got = on_cuda(src, Layout::strided).to(to);
      REQUIRE(got.dtype() == to);
      test::check_close(got, src.to(to), 0, 0);
    }
}

TEST_CASE("cuda: transposed copies (2-D, batched, permuted 4-D, converting) take the tiled transpose") {
  // Sizes around the 32x32 tile: partial tiles on both edges.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 40}, {33, 65}, {64, 31}, {70, 3}}) {
    INFO(m << " x " << n);
    Tensor x = randn({m, n}, {}, &gen);
    Tensor t = on_cuda(x).t().contiguous();
    REQUIRE(t.is_contiguous());
    check_equal<float>(t, x.t().contiguous());
  }
  Tensor b = randn({3, 37, 45}, {.dtype = DType::f64}, &gen);
  check_equal<double>(on_cuda(b).transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous());
  Tensor nchw = randn({2, 5, 7, 9}, {}, &gen);
  check_equal<float>(on_cuda(nchw).permute({0, 2, 3, 1}).contiguous(), nchw.permute({0, 2, 3, 1}).contiguous());
  Tensor i = randint(0, 100, {34, 33}, {.dtype = DType::i64}, &gen);
  check_equal<float>(on_cuda(i).t().to(DType::f32), i.t().to(DType::f32));
  // A transposed source written into a strided destination.
  Tensor dst = zeros({33, 80}, {.device = kCuda}).slice(1, 0, 80, 2);
  Tensor src = randn({40, 33}, {}, &gen);
  dst.copy_(on_cuda(src).t());
  check_equal<float>(dst, src.t().contiguous());
}

TEST_CASE("cuda: fill and creation ops on contiguous and strided outputs") {
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8, DType::boolean}) {
    INFO(dtype_name(dt));
    test::check_close(full({3, 7}, 1.0, {.dtype = dt, .device = kCuda}), full({3, 7}, 1.0, {.dtype = dt}), 0, 0);
  }
  check_equal<float>(eye(5, 7, {.device = kCuda}), eye(5, 7));
  Tensor host = randn({4, 10}, {}, &gen);
  Tensor x = on_cuda(host);
  x.slice(1, 1, 10, 3).fill_(-2.0);
  host.slice(1, 1, 10, 3).fill_(-2.0);
  check_equal<float>(x, host);
  CHECK(host.to_vector<float>()[4] == -2.0f);
}
