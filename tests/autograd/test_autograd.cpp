// The autograd engine: accumulation, grad mode, detach, graph lifetime, deep graphs and
// gradcheck's ability to catch a wrong backward.
#include "support/test_support.h"

using namespace ember;
using autograd::TensorList;
using Catch::Contains;

namespace {

Tensor vec(std::vector<float> v) { return tensor<float>(v); }

int64_t cpu_allocated_bytes() { return allocator_for(Device::cpu()).stats().allocated_bytes; }

// y = x^2 whose backward returns `factor` * 2x times `scale` (elementwise): a deliberately wrong
// gradient when factor != 1 or scale has entries != 1.
Tensor custom_square(const Tensor& x, double factor, const Tensor& scale = {}) {
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = mul(x, x);
  }
  if (autograd::needs_grad(x))
    autograd::record("custom_square", {x}, y,
                     [sx = autograd::save(x), factor, scale](const Tensor& g) -> TensorList {
                       Tensor d = mul(mul(g, sx.get("custom_square")), 2.0 * factor);
                       return {scale.defined() ? mul(d, scale) : d};
                     });
  return y;
}

}  // namespace

TEST_CASE("autograd: gradients accumulate over two backward calls, and zero_grad resets", "[autograd]") {
  Tensor x = vec({1, -2, 3}).requires_grad_();
  sum(mul(x, x)).backward();
  test::check_close(x.grad(), vec({2, -4, 6}), 1e-5, 1e-6);
  sum(mul(x, 3.0)).backward();
  test::check_close(x.grad(), vec({5, -1, 9}), 1e-5, 1e-6);
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x).backward();
  test::check_close(x.grad(), vec({1, 1, 1}), 1e-5, 1e-6);
}

TEST_CASE("autograd: retain_graph allows a second backward through the same graph", "[autograd]") {
  Tensor x = vec({0.5f, 1.0f}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  test::check_close(x.grad(), mul(exp(x.detach()), 2.0), 1e-5, 1e-6);
}

TEST_CASE("autograd: NoGradGuard records nothing and restores the mode", "[autograd]") {
  Tensor x = vec({1, 2}).requires_grad_();
  CHECK(autograd::is_grad_enabled());
  {
    autograd::NoGradGuard outer;
    {
      autograd::NoGradGuard inner;
      CHECK_FALSE(autograd::is_grad_enabled());
    }
    CHECK_FALSE(autograd::is_grad_enabled());  // the inner guard restores the outer state
    Tensor y = exp(mul(x, 2.0));
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    REQUIRE_THROWS_WITH(sum(y).backward(), Contains("does not require grad"));
  }
  CHECK(autograd::is_grad_enabled());
  Tensor z = exp(x);
  CHECK(z.requires_grad());
  CHECK_FALSE(z.is_leaf());
  // Ops on tensors that do not require grad record nothing either.
  CHECK_FALSE(exp(vec({1})).requires_grad());
}

TEST_CASE("autograd: detach shares storage and stops the gradient", "[autograd]") {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor d = x.detach();
  CHECK(d.shares_storage(x));
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  sum(mul(x, d)).backward();  // d/dx (x * const) = const, not 2x
  test::check_close(x.grad(), vec({1, 2, 3}), 1e-5, 1e-6);
}

TEST_CASE("autograd: requires_grad_ only on leaves, and grads only on leaves", "[autograd]") {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y = mul(x, 2.0);
  REQUIRE_THROWS_AS(y.requires_grad_(true), Error);
  REQUIRE_THROWS_WITH(y.requires_grad_(false), Contains("only leaf tensors can change requires_grad"));
  sum(y).backward();
  CHECK_FALSE(y.grad().defined());
  CHECK(x.grad().defined());
  x.requires_grad_(false);  // a leaf may turn it off again
  CHECK_FALSE(mul(x, 2.0).requires_grad());
}

TEST_CASE("autograd: a subexpression used twice gets the sum of both gradients", "[autograd]") {
  SECTION("x used twice in one op and again later") {
    Tensor x = vec({1, -2, 0.5f}).requires_grad_();
    sum(add(mul(x, x), x)).backward();  // d/dx (x^2 + x) = 2x + 1
    test::check_close(x.grad(), vec({3, -3, 2}), 1e-5, 1e-6);
  }
  SECTION("diamond: a = exp(x) feeds two branches") {
    Tensor x = vec({0.1f, 0.2f}).requires_grad_();
    Tensor a = exp(x);
    sum(add(mul(a, a), a)).backward();  // 2 e^2x + e^x
    Tensor xd = x.detach();
    test::check_close(x.grad(), add(mul(exp(mul(xd, 2.0)), 2.0), exp(xd)), 1e-5, 1e-6);
  }
}

TEST_CASE("autograd: leaves never share gradient storage", "[autograd]") {
  // add's backward hands the same gradient to both inputs; each reshape then views it. The two
  // leaves must still own separate .grad() buffers (an optimizer may scale them in place).
  Tensor a = zeros({2, 3}).requires_grad_(), b = zeros({2, 3}).requires_grad_();
  Tensor w = arange(6.0);
  sum(mul(add(a.reshape({6}), b.reshape({6})), w)).backward();
  test::check_close(a.grad(), arange(6.0).reshape({2, 3}), 1e-5, 1e-6);
  test::check_close(b.grad(), arange(6.0).reshape({2, 3}), 1e-5, 1e-6);
  CHECK_FALSE(a.grad().shares_storage(b.grad()));
  a.grad().mul_(0.0);
  test::check_close(b.grad(), arange(6.0).reshape({2, 3}), 1e-5, 1e-6);
}

TEST_CASE("autograd: a 10k-op chain runs without recursion", "[autograd]") {
  Tensor x = full({1}, 1.0, {.dtype = DType::f64, .requires_grad = true});
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = mul(y, 1.0001);
  sum(y).backward();
  CHECK(x.grad().item() == Approx(std::pow(1.0001, 10000)).epsilon(1e-10));
}

TEST_CASE("autograd: a 200k-op chain is freed without deep recursion", "[autograd]") {
  // Destroying the chain must not recurse once per node (that overflows the stack).
  Tensor x = full({1}, 1.0, {.requires_grad = true});
  {
    Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = add(y, 1.0);
    CHECK(y.item() == 200001.0);
  }  // y and its graph die here without backward
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = add(y, 1.0);
  y.backward();
  CHECK(x.grad().item() == 1.0);
}

TEST_CASE("autograd: a graph's saved tensors are freed when its outputs die", "[autograd]") {
  Tensor x = randn({256, 256}).requires_grad_();  // 256 KiB per tensor
  const int64_t before = cpu_allocated_bytes();
  {
    Tensor y = sum(exp(tanh(mul(x, 2.0))));  // saves tanh's and exp's outputs
    CHECK(cpu_allocated_bytes() >= before + 2 * 256 * 256 * 4);
  }
  CHECK(cpu_allocated_bytes() == before);

  // backward frees what the graph saved even while the output lives on.
  Tensor y = sum(exp(tanh(mul(x, 2.0))));
  y.backward();
  Tensor grad = x.grad();
  x.zero_grad();
  const int64_t after_backward = cpu_allocated_bytes();
  grad = Tensor();
  CHECK(after_backward - cpu_allocated_bytes() >= 256 * 256 * 4);  // only x.grad was still held
  CHECK(cpu_allocated_bytes() <= before + 4096);                   // y itself is one element
}

TEST_CASE("autograd: backward on a leaf, and an explicit output gradient", "[autograd]") {
  Tensor x = vec({1, 2}).requires_grad_();
  x.backward(vec({3, 4}));
  test::check_close(x.grad(), vec({3, 4}), 1e-5, 1e-6);
  Tensor z = vec({1, 2}).requires_grad_();
  mul(z, z).backward(vec({1, 10}));
  test::check_close(z.grad(), vec({2, 40}), 1e-5, 1e-6);
}

TEST_CASE("gradcheck: passes a correct custom op and catches a wrong backward", "[autograd][gradcheck]") {
  Tensor x = tensor<double>({0.3, -1.2, 0.7, 1.5, -0.4, 0.9}, {2, 3});
  SECTION("correct backward") {
    const GradcheckResult r = gradcheck([](const TensorList& in) { return custom_square(in[0], 1.0); }, {x});
    INFO(r.report);
    CHECK(r.ok);
    test::require_gradcheck([](const TensorList& in) { return custom_square(in[0], 1.0); }, {x});
  }
  SECTION("backward off by a factor 2 everywhere") {
    const GradcheckResult r = gradcheck([](const TensorList& in) { return custom_square(in[0], 2.0); }, {x});
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.report, Contains("gradcheck failed: input 0 element (") && Contains("analytic") && Contains("numeric"));
    CHECK(r.worst_abs_error > 0.1);
  }
  SECTION("backward off by a factor 2 in one element: the report names it") {
    Tensor scale = ones({2, 3}, {.dtype = DType::f64});
    {
      autograd::NoGradGuard no_grad;
      scale.select(0, 1).select(0, 2).fill_(2.0);
    }
    const GradcheckResult r =
        gradcheck([scale](const TensorList& in) { return custom_square(in[0], 1.0, scale); }, {x});
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.report, Contains("input 0 element (1, 2)"));
  }
  SECTION("gradcheck refuses f32 inputs") {
    REQUIRE_THROWS_WITH(gradcheck([](const TensorList& in) { return exp(in[0]); }, {ones({2})}),
                        Contains("gradcheck: floating input 0 must be f64"));
  }
}
