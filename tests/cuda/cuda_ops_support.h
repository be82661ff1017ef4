// Helpers for the tests that compare the CUDA kernels with the CPU ops: the same values on the
// cuda device, in a chosen layout, and a comparison of a cuda result with the CPU's.
//
//   Tensor a = randn({5, 7}, {}, &gen);
//   Tensor y = exp(on_cuda(a, test::Layout::permuted));
//   check_matches(y, exp(a));
#pragma once

#include "support/test_support.h"

namespace ember::test {

constexpr Device kCuda = Device::cuda();

// x's values on the cuda device in `layout` (relayout runs on the device: cuda copies).
inline Tensor on_cuda(const Tensor& x, Layout layout = Layout::contiguous) {
  return relayout(x.to(kCuda), layout);
}

// A cuda result against the CPU's: same shape and dtype, values within the tolerance.
inline void check_matches(const Tensor& got, const Tensor& expected, double rtol = 1e-6, double atol = 1e-7) {
  REQUIRE(got.is_cuda());
  REQUIRE(got.dtype() == expected.dtype());
  check_close(got, expected, rtol, atol);
}

// Exact equality of a cuda result with the CPU's, element by element.
template <class T>
inline void check_equal(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.is_cuda());
  REQUIRE(got.shape() == expected.shape());
  CHECK(got.to_vector<T>() == expected.to_vector<T>());
}

inline const Layout kLayouts[] = {Layout::contiguous, Layout::permuted, Layout::strided};

}  // namespace ember::test
