// Tensor creation.
//
//   Tensor a = zeros({2, 3});                                  // f32 on the cpu
//   Tensor b = full({4}, 2.5, {.dtype = DType::f64});
//   Tensor c = tensor<float>({1, 2, 3, 4}, {2, 2});
//   Tensor d = randn({8, 8}, {.requires_grad = true});
#pragma once

#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace ember {

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A 0-d tensor with the dtype and device of `like` (how scalars enter binary ops).
Tensor scalar_like(double value, const Tensor& like);

// [start, end) in steps of `step` (the count is ceil((end - start) / step)).
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});

// Copies `count` elements of `dtype` from host memory.
Tensor from_data(const void* data, const Shape& shape, DType dtype, TensorOptions options = {});
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions options = {}) {
  options.dtype = dtype_of<T>();
  return from_data(values.data(), shape, dtype_of<T>(), options);
}
template <class T>
Tensor tensor(const std::vector<T>& values, TensorOptions options = {}) {
  return tensor(values, {int64_t(values.size())}, options);
}

// Random tensors from the default generator (or `gen`).
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, TensorOptions options = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, TensorOptions options = {}, Generator* gen = nullptr);
// Integers in [low, high); dtype i64 unless options say i32.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {.dtype = DType::i64},
               Generator* gen = nullptr);
// A random permutation of 0..n-1 (i64).
Tensor randperm(int64_t n, TensorOptions options = {.dtype = DType::i64}, Generator* gen = nullptr);

}  // namespace ember
