// f64 finite-difference gradcheck of differentiable ops running ON the cuda device: the forward
// and the backward (whose own ops are cuda kernels too: scatter_add for gather, eq/div for
// amax, ...). Small inputs: gradcheck runs the function twice per input element.
#include "cuda_ops_support.h"

using namespace ember;
using autograd::TensorList;
using test::kCuda;
using test::Layout;
using test::on_cuda;

namespace {
Generator gen(8);
Tensor f64(const Shape& shape) { return randn(shape, {.dtype = DType::f64}, &gen); }
}  // namespace

TEST_CASE("cuda gradcheck: exp, mul with broadcast, sum over a dim") {
  test::require_gradcheck([](const TensorList& in) { return exp(in[0]); }, {on_cuda(f64({2, 3}), Layout::permuted)});
  test::require_gradcheck([](const TensorList& in) { return mul(in[0], in[1]); },
                          {on_cuda(f64({2, 3})), on_cuda(f64({3}))});
  test::require_gradcheck([](const TensorList& in) { return sum(in[0], {1}); }, {on_cuda(f64({3, 4}))});
  test::require_gradcheck([](const TensorList& in) { return sum(in[0], {0}); }, {on_cuda(f64({3, 4}), Layout::strided)});
}

TEST_CASE("cuda gradcheck: amax, gather, index_select, tanh of a transposed copy") {
  test::require_gradcheck([](const TensorList& in) { return amax(in[0], {1}); }, {on_cuda(f64({3, 4}))});
  Tensor index = on_cuda(tensor<int64_t>({0, 2, 2, 1, 0, 0}, {2, 3}));
  test::require_gradcheck([&](const TensorList& in) { return gather(in[0], 1, index); }, {on_cuda(f64({2, 3}))});
  Tensor rows = on_cuda(tensor<int64_t>({1, 1, 0}));
  test::require_gradcheck([&](const TensorList& in) { return index_select(in[0], 0, rows); }, {on_cuda(f64({2, 3}))});
  test::require_gradcheck([](const TensorList& in) { return tanh(in[0].t().contiguous()); }, {on_cuda(f64({3, 2}))});
}

TEST_CASE("cuda gradcheck: a wrong gradient is caught on cuda too") {
  // x * detach(x): the value is x^2 (numeric derivative 2x) but the recorded gradient is x.
  auto broken = [](const TensorList& in) { return mul(in[0], in[0].detach()); };
  CHECK_FALSE(autograd::gradcheck(broken, {on_cuda(add(abs(f64({3})), 0.5))}).ok);
}

TEST_CASE("cuda gradcheck: linear and conv2d with a fused bias + activation") {
  // The forward's GEMM epilogue and the one-pass backward (column kernel for linear, channel
  // kernel for conv2d) on the device.
  test::require_gradcheck([](const TensorList& in) { return linear(in[0], in[1], in[2], Activation::tanh); },
                          {on_cuda(f64({3, 4})), on_cuda(f64({5, 4})), on_cuda(f64({5}))});
  test::require_gradcheck(
      [](const TensorList& in) { return conv2d(in[0], in[1], in[2], 1, 1, 1, 2, Activation::sigmoid); },
      {on_cuda(f64({1, 2, 4, 3})), on_cuda(f64({2, 1, 2, 2})), on_cuda(f64({2}))});
}
