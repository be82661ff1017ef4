#include "ops/creation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {
namespace {

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

TensorOptions without_grad(TensorOptions o) {
  o.requires_grad = false;
  return o;
}

Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

// Philox blocks a draw of n values of `dtype` uses (see Note [Philox layout] in ops/cpu/fill.cpp).
uint64_t blocks_for(int64_t n, int64_t per_block) { return uint64_t((n + per_block - 1) / per_block); }

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) { return Tensor::empty(shape, options); }

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = Tensor::empty(shape, without_grad(options));
  fill_kernel(t.device(), t, value);
  return finish(t, options);
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.options()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.options()); }
Tensor scalar_like(double value, const Tensor& like) { return full({}, value, like.options()); }

Tensor arange(double end, TensorOptions options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  EMBER_CHECK(step != 0 && std::isfinite(step), "arange: step must be finite and non-zero, got ", step);
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite");
  EMBER_CHECK((end - start) * step >= 0, "arange: step ", step, " points away from end (start ", start,
              ", end ", end, ")");
  const auto n = int64_t(std::ceil((end - start) / step));
  Tensor t = Tensor::empty({n}, without_grad(options));
  arange_kernel(t.device(), t, start, step);
  return finish(t, options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  EMBER_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  const double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  Tensor t = Tensor::empty({steps}, without_grad(options));
  arange_kernel(t.device(), t, start, step);
  return finish(t, options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  EMBER_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor t = zeros({n, m}, without_grad(options));
  // The diagonal is a strided view with stride m + 1.
  Tensor diag = Tensor::view_of(t, {std::min(n, m)}, {m + 1}, 0);
  fill_kernel(t.device(), diag, 1.0);
  return finish(t, options);
}

Tensor from_data(const void* data, const Shape& shape, DType dtype, TensorOptions options) {
  options.dtype = dtype;
  Tensor host = Tensor::empty(shape, {.dtype = dtype});
  EMBER_CHECK(data != nullptr || host.nbytes() == 0, "from_data: data is null but shape ", shape_str(shape),
              " needs ", host.nbytes(), " bytes");
  if (host.nbytes()) std::memcpy(host.raw_data(), data, host.nbytes());
  Tensor t = options.device.is_cpu() ? host : host.to(options.device);
  return finish(t, options);
}

Tensor uniform(const Shape& shape, double low, double high, TensorOptions options, Generator* gen) {
  EMBER_CHECK(low <= high, "uniform: expected low <= high, got [", low, ", ", high, ")");
  if (is_reduced_float(options.dtype)) {  // drawn in f32 and rounded once
    const TensorOptions f32{.dtype = DType::f32, .device = options.device};
    return finish(uniform(shape, low, high, f32, gen).to(options.dtype), options);
  }
  Tensor t = Tensor::empty(shape, without_grad(options));
  dispatch_float(t.dtype(), "rand", [](auto) {});
  const uint64_t first = pick(gen).reserve(blocks_for(t.numel(), dtype_size(t.dtype()) == 8 ? 2 : 4));
  uniform_kernel(t.device(), t, pick(gen), first, low, high);
  return finish(t, options);
}

Tensor normal(const Shape& shape, double mean, double std, TensorOptions options, Generator* gen) {
  EMBER_CHECK(std >= 0, "normal: std must be non-negative, got ", std);
  if (is_reduced_float(options.dtype)) {  // drawn in f32 and rounded once
    const TensorOptions f32{.dtype = DType::f32, .device = options.device};
    return finish(normal(shape, mean, std, f32, gen).to(options.dtype), options);
  }
  Tensor t = Tensor::empty(shape, without_grad(options));
  dispatch_float(t.dtype(), "randn", [](auto) {});
  const uint64_t first = pick(gen).reserve(blocks_for(t.numel(), dtype_size(t.dtype()) == 8 ? 2 : 4));
  normal_kernel(t.device(), t, pick(gen), first, mean, std);
  return finish(t, options);
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* gen) {
  return uniform(shape, 0.0, 1.0, options, gen);
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* gen) {
  return normal(shape, 0.0, 1.0, options, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* gen) {
  EMBER_CHECK(low < high, "randint: expected low < high, got [", low, ", ", high, ")");
  EMBER_CHECK(!options.requires_grad, "randint: integer tensors cannot require grad");
  Tensor t = Tensor::empty(shape, options);
  const uint64_t first = pick(gen).reserve(blocks_for(t.numel(), 2));
  randint_kernel(t.device(), t, pick(gen), first, low, high);
  return t;
}

Tensor randperm(int64_t n, TensorOptions options, Generator* gen) {
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  EMBER_CHECK(options.dtype == DType::i64, "randperm: expected dtype i64, got ", dtype_name(options.dtype));
  // Sort 0..n-1 by 64-bit random keys (two per Philox block): deterministic for a seed and
  // computable in parallel on any backend.
  Generator& g = pick(gen);
  const uint64_t first = g.reserve(blocks_for(n, 2));
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 2) {
    const auto w = g.block(first + uint64_t(i / 2));
    keys[size_t(i)] = (uint64_t(w[1]) << 32) | w[0];
    if (i + 1 < n) keys[size_t(i + 1)] = (uint64_t(w[3]) << 32) | w[2];
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return tensor(order, {.device = options.device});
}

}  // namespace ember
