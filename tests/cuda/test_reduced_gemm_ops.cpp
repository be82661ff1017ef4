// bf16 and f16 matmul, linear and conv2d on the cuda device, which run on tensor cores
// (ops/cuda/gemm_reduced.h), against the same ops on the CPU (f32 GEMM on the widened operands,
// rounded once): forward and gradients, then the widening path a GPU below sm_80 takes. On the
// simulator (both execution modes) in CI; built in every CUDA mode, so .ci/gpu-check's ctest
// runs it on a GPU too.
//
// Tolerance: both devices sum the same exact f32 products (16-bit x 16-bit fits in f32) in
// different orders and round once, so a result can land one 16-bit ulp away where its f32 sums
// straddle a rounding boundary; a gradient rounded twice on its way (the upstream dz, then the
// GEMM) two. rtol is two ulps at the format's coarsest, 2 * 2^-7 (bf16) and 2 * 2^-10 (f16) of
// the value; atol 1e-3 covers results that cancel to near 0, where the f32 order alone (~1e-6
// here) decides. Values are O(1) to O(10): a wrong element, bias or layout misses by far more.
#include <cmath>
#include <functional>
#include <vector>

#include "cuda/runtime.h"
#include "ember.h"
#include "ops/cuda/conv.h"
#include "ops/cuda/gemm_reduced.h"
#include "support/test_support.h"
#if defined(EMBER_CUDA_SIM)
#include "sim_execution.h"
#endif

using namespace ember;

namespace {

struct Format {
  DType dtype;
  double rtol, atol;
};
const Format kFormats[] = {{DType::bf16, 2 * std::ldexp(1.0, -7), 1e-3}, {DType::f16, 2 * std::ldexp(1.0, -10), 1e-3}};

template <class Body>
void for_each_execution(Body body) {
#if defined(EMBER_CUDA_SIM)
  testing::for_each_sim_execution(body);
#else
  body();
#endif
}

// A cuda result against the CPU's, compared in f32 (widening is exact).
void check_matches(const Tensor& got, const Tensor& expected, const Format& f) {
  REQUIRE(got.is_cuda());
  REQUIRE(got.dtype() == f.dtype);
  REQUIRE(expected.dtype() == f.dtype);
  test::check_close(got.cpu().to(DType::f32), expected.to(DType::f32), f.rtol, f.atol);
}

// The same 16-bit leaves on both devices, each requiring grad.
struct Leaves {
  std::vector<Tensor> cpu, cuda;
};
Leaves leaves(const std::vector<Shape>& shapes, DType dtype, Generator& gen) {
  Leaves l;
  for (const Shape& s : shapes) {
    const Tensor t = randn(s, {}, &gen).to(dtype);
    l.cpu.push_back(t.clone().requires_grad_());
    l.cuda.push_back(t.to(Device::cuda()).requires_grad_());
  }
  return l;
}

// Runs op on both devices, compares the outputs, backpropagates one 16-bit upstream gradient
// through both and compares every leaf's gradient.
void check_op_and_grads(const Format& f, const std::vector<Shape>& shapes,
                        const std::function<Tensor(const std::vector<Tensor>&)>& op) {
  Generator gen(5);
  const Leaves l = leaves(shapes, f.dtype, gen);
  const Tensor y = op(l.cpu), yd = op(l.cuda);
  check_matches(yd, y, f);
  const Tensor dy = randn(y.shape(), {}, &gen).to(f.dtype);
  y.backward(dy);
  yd.backward(dy.to(Device::cuda()));
  for (size_t i = 0; i < shapes.size(); ++i) {
    INFO("gradient of operand " << i);
    check_matches(l.cuda[i].grad(), l.cpu[i].grad(), f);
  }
}

void check_matmuls(const Format& f) {
  using V = const std::vector<Tensor>&;
  {
    INFO("2-D, odd sizes");
    check_op_and_grads(f, {{33, 70}, {70, 37}}, [](V t) { return matmul(t[0], t[1]); });
  }
  {
    INFO("batched, b broadcast over the batch");
    check_op_and_grads(f, {{3, 17, 40}, {40, 9}}, [](V t) { return matmul(t[0], t[1]); });
  }
  {
    INFO("batched, a broadcast over the batch");
    check_op_and_grads(f, {{12, 20}, {2, 3, 20, 7}}, [](V t) { return matmul(t[0], t[1]); });
  }
  {
    INFO("transposed views (column-major operands)");
    check_op_and_grads(f, {{2, 24, 19}, {2, 11, 24}},
                       [](V t) { return matmul(t[0].transpose(1, 2), t[1].transpose(1, 2)); });
  }
  {
    INFO("k = 0: zeros (forward only)");
    // (made on each device: Tensor::to refuses empty tensors whose strides is_contiguous rejects)
    const auto empty_operands = [&](Device d) {
      return matmul(zeros({3, 0}, {.dtype = f.dtype, .device = d}), zeros({0, 4}, {.dtype = f.dtype, .device = d}));
    };
    check_matches(empty_operands(Device::cuda()), empty_operands(Device::cpu()), f);
  }
  {
    INFO("strided view copied first, matrix-vector");
    check_op_and_grads(f, {{20, 30}, {15}}, [](V t) { return matmul(t[0].slice(1, 0, 30, 2), t[1]); });
  }
}

void check_linears(const Format& f) {
  using V = const std::vector<Tensor>&;
  {
    INFO("3-D input, bias");
    check_op_and_grads(f, {{2, 5, 24}, {10, 24}, {10}}, [](V t) { return linear(t[0], t[1], t[2]); });
  }
  {
    INFO("bias + relu");
    check_op_and_grads(f, {{13, 40}, {21, 40}, {21}}, [](V t) { return linear_relu(t[0], t[1], t[2]); });
  }
  {
    INFO("no bias");
    check_op_and_grads(f, {{7, 16}, {5, 16}}, [](V t) { return linear(t[0], t[1]); });
  }
}

struct ConvCase {
  const char* name;
  Shape x, w;
  IntPair stride, padding;
  int64_t groups;
  bool bias;
  Activation act;
  int64_t column_budget = 0;  // bytes; 0 keeps the default (one chunk)
};

void check_convs(const Format& f) {
  const ConvCase cases[] = {
      {"3x3, padding 1, bias", {2, 3, 7, 6}, {4, 3, 3, 3}, 1, 1, 1, true, Activation::none},
      {"stride 2, padding 1, bias + relu", {2, 4, 9, 8}, {6, 4, 3, 3}, 2, 1, 1, true, Activation::relu},
      {"groups 2, asymmetric stride and padding", {2, 4, 6, 7}, {6, 2, 3, 2}, IntPair{2, 1}, IntPair{1, 0}, 2, true,
       Activation::none},
      {"groups 2, one image per chunk", {3, 4, 6, 5}, {6, 2, 3, 3}, 1, 1, 2, true, Activation::relu, 1},
      {"pointwise, groups 2, no bias", {2, 4, 5, 5}, {6, 2, 1, 1}, 1, 0, 2, false, Activation::none},
      {"empty batch: zero weight and bias gradients", {0, 2, 5, 5}, {3, 2, 3, 3}, 1, 1, 1, true, Activation::none},
  };
  for (const ConvCase& c : cases) {
    INFO(c.name);
    if (c.column_budget) cuda::set_conv2d_column_budget(c.column_budget);
    std::vector<Shape> shapes{c.x, c.w};
    if (c.bias) shapes.push_back({c.w[0]});
    check_op_and_grads(f, shapes, [&](const std::vector<Tensor>& t) {
      return conv2d(t[0], t[1], c.bias ? t[2] : Tensor(), c.stride, c.padding, 1, c.groups, c.act);
    });
    cuda::set_conv2d_column_budget(int64_t(128) << 20);
  }
}

}  // namespace

TEST_CASE("cuda: bf16/f16 matmul on tensor cores matches the CPU, with gradients", "[cuda][f16]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  for (const Format& f : kFormats) {
    INFO(dtype_name(f.dtype));
    for_each_execution([&] { check_matmuls(f); });
  }
}

TEST_CASE("cuda: bf16/f16 linear on tensor cores matches the CPU, with gradients", "[cuda][f16]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  for (const Format& f : kFormats) {
    INFO(dtype_name(f.dtype));
    for_each_execution([&] { check_linears(f); });
  }
}

TEST_CASE("cuda: bf16/f16 conv2d on tensor cores matches the CPU, with gradients", "[cuda][f16]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  for (const Format& f : kFormats) {
    INFO(dtype_name(f.dtype));
    for_each_execution([&] { check_convs(f); });
  }
}

// What a GPU below compute capability 8.0 runs: widened operands through the f32 kernels.
TEST_CASE("cuda: bf16/f16 GEMM ops without tensor cores widen to f32 and match the CPU", "[cuda][f16]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  struct Restore {
    ~Restore() { cuda::reduced::set_tensor_cores_enabled(true); }
  } restore;
  cuda::reduced::set_tensor_cores_enabled(false);
  REQUIRE_FALSE(cuda::reduced::tensor_cores_usable());
  for (const Format& f : kFormats) {
    INFO(dtype_name(f.dtype));
    check_matmuls(f);
    check_linears(f);
    check_convs(f);
  }
}
