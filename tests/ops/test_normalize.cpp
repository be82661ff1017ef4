// normalize_rows and normalize_columns (ops/normalize.h), fused ops with their own kernels.
// normalize_rows against the composite it replaced, div(x, clamp(norm(x), 1e-12)), in values and
// gradients on every layout and at the singular rows (zero, below eps, NaN, inf); f64 gradchecks;
// the donated gradient (Note [Fused row normalisation]); and cuda (the simulator in CI) against
// the CPU kernels. normalize_columns below.
#include <cmath>

#include "cuda/runtime.h"
#include "ops/padded_rows.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::check_close;
using ember::test::Layout;

namespace {

Tensor composite(const Tensor& x) { return div(x, clamp(norm(x, 2.0, {1}, /*keepdim=*/true), 1e-12, std::nullopt)); }

// (8, 5) with a zero row, a row below eps, a NaN row and an inf row after four random ones.
Tensor singular_rows(DType dtype) {
  Generator gen(11);
  Tensor x = randn({8, 5}, {.dtype = DType::f64}, &gen);
  x.select(0, 4).fill_(0.0);
  x.select(0, 5).fill_(1e-14);
  x.select(0, 6).fill_(1.0), x.select(0, 6).select(0, 2).fill_(NAN);
  x.select(0, 7).fill_(2.0), x.select(0, 7).select(0, 1).fill_(INFINITY);
  return x.to(dtype);
}

// y = f(x) and dL/dx for L = sum(y * g), all as f64 on the CPU; x laid out as `layout`.
std::pair<Tensor, Tensor> value_and_grad(Tensor (*f)(const Tensor&), const Tensor& x0, const Tensor& g,
                                         Layout layout, Device device) {
  Tensor x = test::relayout(x0.to(device), layout).requires_grad_();
  Tensor y = f(x);
  sum(mul(y, g.to(device))).backward();
  return {y.cpu().to(DType::f64), x.grad().cpu().to(DType::f64)};
}

std::vector<Device> devices() {
  std::vector<Device> out{Device::cpu()};
  if (cuda::is_available()) out.push_back(Device::cuda());
  return out;
}

}  // namespace

TEST_CASE("normalize_rows gives the f32 bits of div(x, clamp(norm(x), eps)), values and gradients, singular rows included") {
  for (DType dtype : {DType::f64, DType::f32})
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::strided}) {
      INFO(dtype_name(dtype) << " " << test::layout_name(layout));
      const Tensor x = singular_rows(dtype);
      Generator gen(12);
      const Tensor g = randn({8, 5}, {.dtype = DType::f64}, &gen).to(dtype);
      const auto [y, dx] = value_and_grad(normalize_rows, x, g, layout, Device::cpu());
      const auto [y_ref, dx_ref] = value_and_grad(composite, x, g, layout, Device::cpu());
      CHECK(normalize_rows(x).is_contiguous());
      // f32 bit for bit (Note [The composite's bits] in ops/cpu/normalize.cpp); f64 (whose row sums
      // no rounding to a narrower type hides) to its rounding. NaN compares NaN for NaN.
      const double tol = dtype == DType::f64 ? 1e-14 : 0;
      check_close(y, y_ref, tol, tol);
      check_close(dx, dx_ref, tol, tol);
    }
}

TEST_CASE("normalize_rows passes an f64 gradcheck on every layout") {
  Generator gen(13);
  const Tensor x0 = randn({6, 4}, {.dtype = DType::f64}, &gen);
  for (Device device : devices())
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::strided}) {
      INFO(device << " " << test::layout_name(layout));
      test::require_gradcheck([](const TensorList& in) { return normalize_rows(in[0]); },
                              {test::relayout(x0.to(device), layout).requires_grad_()});
    }
}

namespace {

// f(x)'s backward writes dx into a gradient nothing else holds (mul's backward hands f its only
// reference to a fresh one: dx is written there and adopted by x.grad(), so backward needs one
// x-sized buffer, not two), and only reads a gradient the caller holds.
void check_donated_gradient(Tensor (*f)(const Tensor&), const Shape& shape) {
  Generator gen(14);
  const Tensor x = randn(shape, {}, &gen).requires_grad_();
  const int64_t bytes = x.nbytes();
  Allocator& allocator = allocator_for(Device::cpu());
  {
    const Tensor y = f(x);
    const Tensor loss = sum(mul(y, 3.0));
    const int64_t before = allocator.stats().allocated_bytes;
    allocator.reset_peak_stats();
    loss.backward();
    CHECK(allocator.stats().peak_allocated_bytes - before < bytes + bytes / 2);
  }
  x.zero_grad();
  const Tensor g = full(shape, 2.0);
  f(x).backward(g);
  check_close(g, full(shape, 2.0), 0, 0);
}

}  // namespace

TEST_CASE("normalize_rows writes dx into a donated gradient, never into a shared one") {
  check_donated_gradient(normalize_rows, {256, 64});
}

TEST_CASE("normalize_rows on cuda equals the CPU kernels (row-major, transposed and strided rows)") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device");
  for (DType dtype : {DType::f64, DType::f32})
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::strided}) {
      INFO(dtype_name(dtype) << " " << test::layout_name(layout));
      // Rows shorter and longer than a warp's 1024 values (Note [Row mappings]), singular rows.
      for (const Tensor& x : {singular_rows(dtype), randn({3, 1500}, {.dtype = dtype})}) {
        const Tensor g = randn(x.shape(), {.dtype = dtype});
        const auto [y, dx] = value_and_grad(normalize_rows, x, g, layout, Device::cuda());
        const auto [y_cpu, dx_cpu] = value_and_grad(normalize_rows, x, g, layout, Device::cpu());
        const double tol = dtype == DType::f64 ? 1e-13 : 2e-6;
        check_close(y, y_cpu, tol, tol);
        check_close(dx, dx_cpu, tol, tol);
      }
    }
}

// ---- normalize_columns --------------------------------------------------------------------
// The column form for class weights kept in PML's (D, C) layout: against normalize_rows of the
// transpose (the forward bit for bit: Note [Column blocks] in ops/cpu/normalize.cpp) and the
// composite div(x, clamp(norm(x, dim 0), eps)) in gradients, singular columns included; the padded
// rows (Note [Padded rows]); f64 gradchecks; the donated gradient; bad input; cuda against the CPU.

namespace {

Tensor composite_columns(const Tensor& x) {
  return div(x, clamp(norm(x, 2.0, {0}, /*keepdim=*/true), 1e-12, std::nullopt));
}
Tensor via_rows(const Tensor& x) { return normalize_rows(x.t()).t(); }

// (5, 8) with a zero column, a column below eps, a NaN column and an inf column after four
// random ones.
Tensor singular_columns(DType dtype) {
  Generator gen(21);
  Tensor x = randn({5, 8}, {.dtype = DType::f64}, &gen);
  x.select(1, 4).fill_(0.0);
  x.select(1, 5).fill_(1e-14);
  x.select(1, 6).fill_(1.0), x.select(1, 6).select(0, 2).fill_(NAN);
  x.select(1, 7).fill_(2.0), x.select(1, 7).select(0, 1).fill_(INFINITY);
  return x.to(dtype);
}

}  // namespace

TEST_CASE("normalize_columns has normalize_rows' bits of the transpose, the composite's gradients, padded rows") {
  for (DType dtype : {DType::f64, DType::f32})
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::strided}) {
      INFO(dtype_name(dtype) << " " << test::layout_name(layout));
      const Tensor x = singular_columns(dtype);
      Generator gen(22);
      const Tensor g = randn({5, 8}, {.dtype = DType::f64}, &gen).to(dtype);
      const auto [y, dx] = value_and_grad(normalize_columns, x, g, layout, Device::cpu());
      const auto [y_rows, dx_rows] = value_and_grad(via_rows, x, g, layout, Device::cpu());
      const auto [y_ref, dx_ref] = value_and_grad(composite_columns, x, g, layout, Device::cpu());
      check_close(y, y_rows, 0, 0);  // NaN compares NaN for NaN
      // The column sums of dx run in another order than normalize_rows' row sums: to rounding.
      const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
      check_close(dx, dx_ref, tol, tol);
      check_close(dx, dx_rows, tol, tol);
      const Tensor y_padded = normalize_columns(x);
      CHECK(y_padded.stride(1) == 1);
      CHECK(y_padded.stride(0) == padded_row_stride(8, int64_t(dtype_size(dtype))));
    }
}

TEST_CASE("padded_row_stride rounds rows to cache lines and keeps them off multiples of 4 KiB") {
  CHECK(padded_row_stride(1000, 4) == 1008);
  CHECK(padded_row_stride(1024, 4) == 1040);  // 4 KiB: one line more
  CHECK(padded_row_stride(512, 4) == 512);
  CHECK(padded_row_stride(512, 8) == 520);
  CHECK(padded_row_stride(3, 8) == 8);
  CHECK(padded_row_stride(0, 4) == 16);
}

TEST_CASE("normalize_columns passes an f64 gradcheck on every layout") {
  Generator gen(23);
  const Tensor x0 = randn({4, 6}, {.dtype = DType::f64}, &gen);
  for (Device device : devices())
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::strided}) {
      INFO(device << " " << test::layout_name(layout));
      test::require_gradcheck([](const TensorList& in) { return normalize_columns(in[0]); },
                              {test::relayout(x0.to(device), layout).requires_grad_()});
    }
}

TEST_CASE("normalize_columns writes dx into a donated gradient, never into a shared one") {
  check_donated_gradient(normalize_columns, {64, 256});
  // A gradient with another column stride than 1 is read through a contiguous copy.
  Generator gen(24);
  const Tensor x = randn({64, 256}, {}, &gen).requires_grad_();
  normalize_columns(x).backward(full({256, 64}, 2.0).t());
  const Tensor dx = x.grad().clone();
  x.zero_grad();
  normalize_columns(x).backward(full({64, 256}, 2.0));
  check_close(dx, x.grad(), 0, 0);
}

// sum over dim 0 hands the backward one row broadcast down the columns (row stride 0): dx must not
// overwrite it in place (its rows overlap), and the gradients stay the composite's.
TEST_CASE("normalize_columns under a sum over rows: a broadcast gradient is read, not overwritten") {
  Generator gen(25);
  const Tensor x0 = randn({6, 40}, {.dtype = DType::f64}, &gen), v = randn({40}, {.dtype = DType::f64}, &gen);
  Tensor x = x0.clone().requires_grad_(), x_ref = x0.clone().requires_grad_();
  sum(mul(sum(normalize_columns(x), {0}), v)).backward();
  sum(mul(sum(composite_columns(x_ref), {0}), v)).backward();
  check_close(x.grad(), x_ref.grad(), 1e-13, 1e-13);
}

TEST_CASE("normalize_columns rejects what is not a 2-D f32 or f64 matrix") {
  CHECK_THROWS_WITH(normalize_columns(zeros({3})), Catch::Matchers::Contains(
                                                       "normalize_columns: expected a 2-D x, got shape (3,)"));
  CHECK_THROWS_WITH(normalize_columns(zeros({2, 3, 4})), Catch::Matchers::Contains("got shape (2, 3, 4)"));
  CHECK_THROWS_WITH(normalize_columns(zeros({2, 3}, {.dtype = DType::i64})),
                    Catch::Matchers::Contains("normalize_columns: expected an f32 or f64 x, got i64"));
}

TEST_CASE("normalize_columns on cuda equals the CPU kernels (singular, long and wide columns)") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device");
  for (DType dtype : {DType::f64, DType::f32})
    for (Layout layout : {Layout::contiguous, Layout::strided}) {
      INFO(dtype_name(dtype) << " " << test::layout_name(layout));
      for (const Tensor& x : {singular_columns(dtype), randn({1500, 3}, {.dtype = dtype}),
                              randn({7, 1100}, {.dtype = dtype})}) {
        const Tensor g = randn(x.shape(), {.dtype = dtype});
        const auto [y, dx] = value_and_grad(normalize_columns, x, g, layout, Device::cuda());
        const auto [y_cpu, dx_cpu] = value_and_grad(normalize_columns, x, g, layout, Device::cpu());
        const double tol = dtype == DType::f64 ? 1e-13 : 2e-6;
        check_close(y, y_cpu, tol, tol);
        check_close(dx, dx_cpu, tol, tol);
      }
    }
}
