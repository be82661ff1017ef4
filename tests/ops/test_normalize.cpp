// normalize_rows (ops/normalize.h), one fused op with its own kernels: against the composite
// it replaced, div(x, clamp(norm(x), 1e-12)), in values and gradients on every layout and at
// the singular rows (zero, below eps, NaN, inf); f64 gradchecks; the donated gradient (Note
// [Fused row normalisation]); and cuda (the simulator in CI) against the CPU kernels.
#include <cmath>

#include "cuda/runtime.h"
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

TEST_CASE("normalize_rows writes dx into a donated gradient, never into a shared one") {
  Generator gen(14);
  const Tensor x = randn({256, 64}, {}, &gen).requires_grad_();
  const int64_t bytes = x.nbytes();
  Allocator& allocator = allocator_for(Device::cpu());
  {
    // mul's backward hands normalize_rows its only reference to a fresh gradient: dx is written
    // there and adopted by x.grad(), so backward needs one x-sized buffer, not two.
    const Tensor y = normalize_rows(x);
    const Tensor loss = sum(mul(y, 3.0));
    const int64_t before = allocator.stats().allocated_bytes;
    allocator.reset_peak_stats();
    loss.backward();
    CHECK(allocator.stats().peak_allocated_bytes - before < bytes + bytes / 2);
  }
  x.zero_grad();
  // A gradient the caller still holds is read, not overwritten.
  const Tensor g = full({256, 64}, 2.0);
  normalize_rows(x).backward(g);
  check_close(g, full({256, 64}, 2.0), 0, 0);
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
