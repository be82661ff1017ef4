// bf16 matmul / bmm, linear and conv2d on the CPU read bf16 directly (cpu::gemm_bf16, f32
// accumulation, one rounding: Note [Native bf16 GEMM ops] in ops/cpu/gemm_typed.h); forward and
// gradients are checked against the same computation in f32 on the widened operands. f16 keeps
// the widening fallback (Note [Reduced-precision fallback]).
//
// Tolerance: the bf16 result is round(s') where s' is the f32 sum of the same exact products
// (bf16 x bf16 is exact in f32) in another order, and the reference is the unrounded f32 sum s of
// the widened operands: |round(s') - s| <= half a bf16 ulp (<= 2^-8 |s'|) + |s' - s|. So rtol =
// 2^-7 (two half-ulps), and atol = 2e-3 for |s' - s| where a sum cancels to near zero (about
// sqrt(K) eps_f32 sum|a b| for K <= 576 terms of magnitude <= ~10 here). Gradients start from the
// same bf16-exact upstream gradient on both sides (loss() below), so the same bound holds (for
// sigmoid / tanh see that test case). A wrong index, a missing tap or a lost operand gives errors of
// order 1 and fails.
#include <cmath>

#include "ops/autocast.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr double kRtol = 1.0 / 128;  // two half-ulps of bf16 (8 significant bits)
constexpr double kAtol = 2e-3;
constexpr double kSmoothActAtol = 2e-2;

Generator gen(4321);

Tensor bf16_randn(const Shape& s, double scale = 1.0) { return mul(randn(s, {}, &gen), scale).to(DType::bf16); }

// The widened copy of a bf16 tensor, a fresh f32 leaf when `grad`.
Tensor widened_leaf(const Tensor& x, bool grad) { return x.detach().to(DType::f32).requires_grad_(grad); }

// sum(y * r) for a fixed random r of y's shape in y's dtype (r is bf16-exact, so both sides
// backpropagate the same upstream gradient r).
Tensor loss(const Tensor& y, const Tensor& r_bf16) { return sum(mul(y, r_bf16.to(y.dtype()))); }

const char* recorded_op(const Tensor& y) { return y.autograd_meta()->grad_fn->name; }

void check_bf16_close(const Tensor& got, const Tensor& want_f32, double atol = kAtol) {
  REQUIRE(got.defined());
  CHECK(got.dtype() == DType::bf16);
  test::check_close(got.to(DType::f32), want_f32, kRtol, atol);
}

// Checks f(leaves in bf16) against f(widened leaves in f32): the output and every leaf's gradient.
// The output must not come from the widening fallback (whose last node is the rounding "to");
// native_op, when given, is the node the op itself records.
template <class F>
void check_against_f32(const std::vector<Tensor>& bf16_inputs, const char* native_op, F&& f,
                       double grad_atol = kAtol) {
  std::vector<Tensor> low, wide;
  for (const Tensor& x : bf16_inputs) {
    low.push_back(x.defined() ? x.detach().requires_grad_(true) : Tensor());
    wide.push_back(x.defined() ? widened_leaf(x, true) : Tensor());
  }
  const Tensor y = f(low), y_ref = f(wide);
  CHECK(std::string(recorded_op(y)) != "to");
  if (native_op) CHECK(std::string(recorded_op(y)) == native_op);
  check_bf16_close(y, y_ref);
  const Tensor r = bf16_randn(y.shape());
  loss(y, r).backward();
  loss(y_ref, r).backward();
  for (size_t i = 0; i < low.size(); ++i) {
    if (!low[i].defined()) continue;
    INFO("gradient of input " << i);
    check_bf16_close(low[i].grad(), wide[i].grad(), grad_atol);
  }
}

}  // namespace

TEST_CASE("bf16 matmul / bmm on the CPU: native, f32-accumulated forward and gradients", "[ops][bf16]") {
  SECTION("2-D, K = 200 (several micro-kernel steps, odd tails)") {
    check_against_f32({bf16_randn({37, 200}), bf16_randn({200, 53})}, nullptr,
                      [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); });
  }
  SECTION("transposed operands are read in place") {
    check_against_f32({bf16_randn({64, 9}), bf16_randn({17, 64})}, nullptr,
                      [](const std::vector<Tensor>& t) { return matmul(t[0].t(), t[1].t()); });
  }
  SECTION("batched with a broadcast operand") {
    // The broadcast operand's gradient is the sum of 6 per-item bf16 gradients, each rounded
    // before the sum (as in PyTorch): 6 half-ulps of values |g| < 16 (<= 0.03 each) on top.
    check_against_f32({bf16_randn({3, 2, 11, 40}), bf16_randn({40, 5})}, nullptr,
                      [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }, 0.2);
  }
  SECTION("batched, as many items as threads") {
    check_against_f32({bf16_randn({8, 5, 33}), bf16_randn({8, 33, 7})}, nullptr,
                      [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); });
  }
  SECTION("vector operands") {
    const Tensor v = bf16_randn({30}), m = bf16_randn({30, 6});
    check_bf16_close(matmul(v, m), matmul(v.to(DType::f32), m.to(DType::f32)));
    check_bf16_close(matmul(m.t(), v), matmul(m.t().to(DType::f32), v.to(DType::f32)));
  }
}

TEST_CASE("bf16 linear on the CPU: bias and fused activations, forward and gradients", "[ops][bf16]") {
  for (Activation act : {Activation::none, Activation::relu}) {
    INFO(activation_name(act));
    check_against_f32({bf16_randn({2, 19, 70}), bf16_randn({45, 70}, 0.3), bf16_randn({45})},
                      act == Activation::none ? "linear" : "linear_act",
                      [&](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2], act); });
  }
  check_against_f32({bf16_randn({16, 128}), bf16_randn({10, 128}, 0.2), Tensor()}, "linear",
                    [](const std::vector<Tensor>& t) { return linear(t[0], t[1]); });
}

// Through sigmoid / tanh the derivative is formed from the bf16-rounded output (as in PyTorch),
// so the f32 reference's gradients start from dz = r * act'(y) with y the bf16 output widened;
// the native path then rounds dz to bf16 (2^-9 relative per term) before its GEMMs, which the
// gradient tolerance kSmoothActAtol covers (K <= 38 terms of |dz x| <= ~1).
TEST_CASE("bf16 linear with sigmoid / tanh: gradients from the rounded output", "[ops][bf16]") {
  for (Activation act : {Activation::sigmoid, Activation::tanh}) {
    INFO(activation_name(act));
    const Tensor x = bf16_randn({38, 70}).requires_grad_(true), w = bf16_randn({45, 70}, 0.3).requires_grad_(true);
    const Tensor b = bf16_randn({45}).requires_grad_(true);
    const Tensor xw = widened_leaf(x, false), ww = widened_leaf(w, false), bw = widened_leaf(b, false);
    const Tensor y = linear(x, w, b, act);
    CHECK(std::string(recorded_op(y)) == "linear_act");
    check_bf16_close(y, linear(xw, ww, bw, act));
    const Tensor r = bf16_randn(y.shape());
    loss(y, r).backward();
    const Tensor yw = y.detach().to(DType::f32), rw = r.to(DType::f32);
    const Tensor slope = act == Activation::sigmoid ? mul(yw, sub(ones_like(yw), yw)) : sub(ones_like(yw), mul(yw, yw));
    const Tensor dz = mul(rw, slope);
    check_bf16_close(x.grad(), matmul(dz, ww), kSmoothActAtol);
    check_bf16_close(w.grad(), matmul(dz.t(), xw), kSmoothActAtol);
    check_bf16_close(b.grad(), sum(dz, {0}), kSmoothActAtol);
  }
}

TEST_CASE("bf16 conv2d on the CPU: stride, padding, dilation, groups, bias and relu, forward and gradients",
          "[ops][bf16]") {
  struct Case {
    const char* name;
    Shape x, w;
    IntPair stride, padding, dilation;
    int64_t groups;
    bool bias;
    Activation act;
  };
  const Case cases[] = {
      {"3x3 pad 1 + bias", {2, 3, 10, 9}, {8, 3, 3, 3}, 1, 1, 1, 1, true, Activation::none},
      {"3x3 stride 2 + bias + relu", {2, 4, 11, 12}, {6, 4, 3, 3}, 2, 1, 1, 1, true, Activation::relu},
      {"5x3 stride (2, 1), pad (2, 0), dilation (1, 2)", {1, 2, 13, 12}, {5, 2, 5, 3}, {2, 1}, {2, 0}, {1, 2}, 1,
       false, Activation::none},
      {"grouped 3x3 (groups 2)", {2, 8, 7, 7}, {12, 4, 3, 3}, 1, 1, 1, 2, true, Activation::none},
      {"depthwise 3x3 stride 2", {3, 6, 9, 9}, {6, 1, 3, 3}, 2, 1, 1, 6, true, Activation::relu},
      {"pointwise 1x1 (no columns)", {2, 32, 6, 5}, {16, 32, 1, 1}, 1, 0, 1, 1, true, Activation::none},
      {"1x1 stride 2", {2, 8, 7, 7}, {4, 8, 1, 1}, 2, 0, 1, 1, false, Activation::none},
      {"MNIST-like 5x5, K = 288 inner", {4, 32, 12, 12}, {16, 32, 3, 3}, 1, 1, 1, 1, true, Activation::relu},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Tensor b = c.bias ? bf16_randn({c.w[0]}) : Tensor();
    check_against_f32({bf16_randn(c.x), bf16_randn(c.w, 0.3), b},
                      c.act == Activation::none ? "conv2d" : "conv2d_act", [&](const std::vector<Tensor>& t) {
                        return conv2d(t[0], t[1], t[2], c.stride, c.padding, c.dilation, c.groups, c.act);
                      });
  }
}

TEST_CASE("bf16 conv2d gradient ops called directly run natively too", "[ops][bf16]") {
  const Tensor x = bf16_randn({2, 4, 8, 8}), w = bf16_randn({6, 2, 3, 3}), dy = bf16_randn({2, 6, 4, 4});
  const Tensor dx = conv2d_input_grad(dy, w, x.shape(), 2, 1, 1, 2);
  check_bf16_close(dx, conv2d_input_grad(dy.to(DType::f32), w.to(DType::f32), x.shape(), 2, 1, 1, 2));
  const Tensor dw = conv2d_weight_grad(x, dy, w.shape(), 2, 1, 1, 2);
  check_bf16_close(dw, conv2d_weight_grad(x.to(DType::f32), dy.to(DType::f32), w.shape(), 2, 1, 1, 2));
  const Tensor db = conv2d_bias_grad(dy);
  check_bf16_close(db, conv2d_bias_grad(dy.to(DType::f32)));
}

TEST_CASE("f16 GEMM ops keep the widening fallback (no f16 dot product on this CPU)", "[ops][f16]") {
  const Tensor a = randn({5, 8}, {}, &gen).to(DType::f16).requires_grad_(true);
  const Tensor b = randn({8, 3}, {}, &gen).to(DType::f16);
  const Tensor y = matmul(a, b);
  CHECK(y.dtype() == DType::f16);
  CHECK(std::string(recorded_op(y)) == "to");  // computed in f32, then rounded by .to()
}

TEST_CASE("autocast bf16: conv and linear run natively and f32 master weights get f32 gradients", "[ops][bf16]") {
  const Tensor x = randn({2, 3, 8, 8}, {}, &gen);
  Tensor w = mul(randn({4, 3, 3, 3}, {}, &gen), 0.3).requires_grad_(true);
  Tensor b = zeros({4}).requires_grad_(true);
  Tensor y;
  {
    AutocastGuard autocast(DType::bf16);
    y = conv2d(x, w, b, 1, 1, 1, 1, Activation::relu);
  }
  CHECK(y.dtype() == DType::bf16);
  CHECK(std::string(recorded_op(y)) == "conv2d_act");
  sum(y).backward();
  CHECK(w.grad().dtype() == DType::f32);
  CHECK(b.grad().dtype() == DType::f32);
  // The same on explicit bf16 copies in f32.
  Tensor wr = w.detach().to(DType::bf16).to(DType::f32).requires_grad_(true);
  Tensor br = zeros({4}).requires_grad_(true);
  sum(conv2d(x.to(DType::bf16).to(DType::f32), wr, br, 1, 1, 1, 1, Activation::relu)).backward();
  test::check_close(w.grad(), wr.grad(), kRtol, kAtol);
  test::check_close(b.grad(), br.grad(), kRtol, kAtol);
}
