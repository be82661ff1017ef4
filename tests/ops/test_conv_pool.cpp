// conv2d_max_pool2d (Note [Convolution, activation and max pool as one op] in ops/conv_pool.h):
// max_pool2d(conv2d(...)) recorded as one node. Against the three recorded ops: the same values
// and the same input and weight gradients bit for bit, the bias gradient to rounding, for every
// activation, with and without bias, grouped and strided convolutions, 2 x 2, 3 x 3 and padded
// pools on planes that floor mode trims, ties (relu's zeros), in f32, in bf16 under autocast and on
// cuda; overlapping windows, calls without a gradient and f16 on the CPU run the three ops; f64
// gradchecks.
#include <string>
#include <utility>

#include "autograd/graph.h"
#include "cuda/runtime.h"
#include "ember.h"
#include "ops/autocast.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::check_close;

namespace {

constexpr Activation kActivations[] = {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh};

struct Layer {
  IntPair stride, padding;
  int64_t groups;
  MaxPoolArgs pool;
};

Tensor fused(const TensorList& t, const Layer& l, Activation act) {
  return conv2d_max_pool2d(t[0], t[1], t[2], l.stride, l.padding, 1, l.groups, act, l.pool);
}
Tensor unfused(const TensorList& t, const Layer& l, Activation act) {
  return max_pool2d(conv2d(t[0], t[1], t[2], l.stride, l.padding, 1, l.groups, act), l.pool.kernel, l.pool.stride,
                    l.pool.padding);
}

struct Run {
  Tensor y;
  TensorList grads;
  std::string op;  // the node that produced y
};

Run run(bool fuse, const TensorList& inputs, const Layer& l, Activation act, const Tensor& gy) {
  TensorList leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.defined() ? t.detach().requires_grad_() : Tensor());
  Run r;
  r.y = fuse ? fused(leaves, l, act) : unfused(leaves, l, act);
  r.op = r.y.autograd_meta()->grad_fn->name;
  sum(mul(r.y, gy)).backward();
  for (const Tensor& t : leaves) r.grads.push_back(t.defined() ? t.grad() : Tensor());
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.to(DType::f64).to_vector<double>() == b.to(DType::f64).to_vector<double>();
}

// Checks the fused op against the three ops on x (N, C, H, W), w and b on `device`.
void check_against_three_ops(const Tensor& x, const Tensor& w, const Tensor& b, const Layer& l, Activation act,
                             Device device, const std::string& what) {
  INFO(what << ", " << activation_name(act) << (b.defined() ? ", bias" : ", no bias") << " on " << device);
  const TensorList inputs{x.to(device), w.to(device), b.defined() ? b.to(device) : Tensor()};
  Generator gen(11);
  const Tensor probe = unfused(inputs, l, act);
  const Tensor gy = randn(probe.shape(), {.dtype = probe.dtype()}, &gen).to(device);
  const Run one = run(true, inputs, l, act, gy), three = run(false, inputs, l, act, gy);
  CHECK(one.op == "conv2d_act_max_pool2d");
  CHECK(three.op == "max_pool2d");
  CHECK(same_bits(one.y, three.y));
  CHECK(same_bits(one.grads[0], three.grads[0]));
  CHECK(same_bits(one.grads[1], three.grads[1]));
  if (b.defined()) check_close(one.grads[2], three.grads[2], 1e-5, 1e-5);
}

}  // namespace

TEST_CASE("conv2d_max_pool2d equals max_pool2d of conv2d, gradients included", "[conv][pool][fused]") {
  struct Case {
    int64_t batch, in, out, h, w, kernel;
    Layer layer;
  };
  const Case cases[] = {
      {3, 1, 16, 28, 28, 3, {1, 1, 1, {.kernel = 2}}},                        // MNIST's first layer
      {2, 16, 32, 14, 14, 3, {1, 1, 1, {.kernel = 2}}},                       // and its second
      {2, 4, 8, 11, 9, 3, {1, 1, 1, {.kernel = 2}}},                          // odd planes: floor mode trims
      {2, 6, 6, 13, 12, 3, {{2, 1}, {1, 0}, 3, {.kernel = 3}}},               // grouped, strided, 3 x 3 pool
      {2, 4, 8, 10, 10, 3, {1, 1, 2, {.kernel = 2, .stride = {{2, 3}}, .padding = 1}}},  // padded, wider stride
  };
  Generator gen(5);
  for (const Case& c : cases)
    for (Activation act : kActivations)
      for (bool bias : {true, false}) {
        const Tensor x = randn({c.batch, c.in, c.h, c.w}, {}, &gen);
        const Tensor w = randn({c.out, c.in / c.layer.groups, c.kernel, c.kernel}, {}, &gen);
        const Tensor b = bias ? randn({c.out}, {}, &gen) : Tensor();
        check_against_three_ops(x, w, b, c.layer, act, Device::cpu(),
                                shape_str(x.shape()) + " -> " + std::to_string(c.out));
      }
}

TEST_CASE("conv2d_max_pool2d takes relu's ties as the three ops do", "[conv][pool][fused]") {
  // A negative bias zeroes most outputs: windows of equal zeros, and windows with one positive.
  Generator gen(6);
  const Tensor x = randn({4, 3, 12, 12}, {}, &gen), w = mul(randn({8, 3, 3, 3}, {}, &gen), 0.3);
  const Tensor b = full({8}, -1.5);
  check_against_three_ops(x, w, b, {1, 1, 1, {.kernel = 2}}, Activation::relu, Device::cpu(), "ties");
}

namespace {

// The fused op and the three ops under autocast to `low`, on a 2 x 16 x 14 x 14 batch (MNIST's
// second layer) with f32 leaves.
std::pair<Run, Run> runs_under_autocast(DType low, Activation act) {
  Generator gen(7);
  const Tensor x = randn({2, 16, 14, 14}, {}, &gen), w = randn({32, 16, 3, 3}, {}, &gen), b = randn({32}, {}, &gen);
  const Layer l{1, 1, 1, {.kernel = 2}};
  const Tensor gy = randn({2, 32, 7, 7}, {}, &gen);
  const AutocastGuard autocast(low);
  return {run(true, {x, w, b}, l, act, gy), run(false, {x, w, b}, l, act, gy)};
}

}  // namespace

// bf16 runs fused; its bias gradient sums bf16 steps in another order. f16 convolutions on the CPU
// run in f32 and round (conv2d's fallback), so the three ops take the activation's backward in
// f32: the fused node would not give their gradients, and is not used.
TEST_CASE("conv2d_max_pool2d under autocast: bf16 fused, f16 on the CPU as the three ops", "[conv][pool][fused]") {
  struct Case {
    DType low;
    Activation act;
    const char* op;
    double bias_tolerance;
  };
  for (const Case& c : {Case{DType::bf16, Activation::relu, "conv2d_act_max_pool2d", 1e-2},
                        Case{DType::f16, Activation::sigmoid, "max_pool2d", 0}}) {
    INFO(dtype_name(c.low));
    const auto [one, three] = runs_under_autocast(c.low, c.act);
    REQUIRE(one.y.dtype() == c.low);
    CHECK(one.op == c.op);
    CHECK(same_bits(one.y, three.y));
    for (size_t i = 0; i < 3; ++i) {
      INFO("gradient " << i);
      REQUIRE(one.grads[i].dtype() == DType::f32);  // the f32 leaves' gradients
      if (i < 2) CHECK(same_bits(one.grads[i], three.grads[i]));
      else check_close(one.grads[2], three.grads[2], c.bias_tolerance, c.bias_tolerance);
    }
  }
}

TEST_CASE("conv2d_max_pool2d runs the three ops for overlapping windows and without a gradient",
          "[conv][pool][fused]") {
  Generator gen(8);
  const Tensor x = randn({2, 3, 9, 9}, {}, &gen), w = randn({4, 3, 3, 3}, {.requires_grad = true}, &gen);
  const Tensor overlapping = conv2d_max_pool2d(x, w, {}, 1, 1, 1, 1, Activation::relu, {.kernel = 3, .stride = 2});
  CHECK(std::string(overlapping.autograd_meta()->grad_fn->name) == "max_pool2d");
  CHECK(same_bits(overlapping, max_pool2d(conv2d(x, w, {}, 1, 1, 1, 1, Activation::relu), 3, 2)));
  const autograd::NoGradGuard no_grad;
  const Tensor plain = conv2d_max_pool2d(x, w, {}, 1, 1, 1, 1, Activation::relu, {.kernel = 2});
  CHECK_FALSE(plain.requires_grad());
  CHECK(same_bits(plain, max_pool2d(conv2d(x, w, {}, 1, 1, 1, 1, Activation::relu), 2)));
}

TEST_CASE("conv2d_max_pool2d gradchecks in f64 for every activation", "[conv][pool][fused][gradcheck]") {
  Generator gen(9);
  auto f64 = [&](const Shape& s) { return randn(s, {.dtype = DType::f64}, &gen); };
  for (Activation act : kActivations) {
    INFO(activation_name(act));
    test::require_gradcheck(
        [&](const TensorList& t) { return conv2d_max_pool2d(t[0], t[1], t[2], 1, 1, 1, 1, act, {.kernel = 2}); },
        {f64({2, 3, 6, 6}), f64({4, 3, 3, 3}), f64({4})});
    test::require_gradcheck(
        [&](const TensorList& t) {
          return conv2d_max_pool2d(t[0], t[1], {}, {1, 2}, 1, 1, 2, act, {.kernel = 3, .padding = 1});
        },
        {f64({1, 4, 7, 9}), f64({4, 2, 3, 3})});
  }
}

TEST_CASE("conv2d_max_pool2d on cuda equals the three ops there", "[conv][pool][fused][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  Generator gen(10);
  const Tensor x = randn({2, 4, 10, 10}, {}, &gen), w = randn({8, 4, 3, 3}, {}, &gen), b = randn({8}, {}, &gen);
  check_against_three_ops(x, w, b, {1, 1, 1, {.kernel = 2}}, Activation::relu, Device::cuda(), "cuda");
}
