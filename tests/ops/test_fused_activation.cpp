// Bias + activation fused into linear, conv2d and batch_norm (Note [Epilogue activations] in
// ops/activation.h): the fused ops give the unfused composition's values and gradients, pass
// f64 gradchecks for every activation, and bias_activation_backward reports bad input. Their
// PyTorch values and gradients are cases of the op table (tests/ops/test_op_table.cpp).
#include <cmath>
#include <string>
#include <vector>

#include "ember.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::check_close;
using ember::test::error_of;

namespace {

constexpr Activation kActivations[] = {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh};

// Runs `fused` and `unfused` (the same function of in) forward and backward with one upstream
// gradient and checks equal outputs and input gradients.
void check_same_as_unfused(const std::function<Tensor(const TensorList&)>& fused,
                             const std::function<Tensor(const TensorList&)>& unfused, const TensorList& inputs,
                             double tol, const std::string& what) {
  auto leaves = [&] {
    TensorList out;
    for (const Tensor& t : inputs) out.push_back(t.defined() ? t.detach().requires_grad_() : Tensor());
    return out;
  };
  TensorList a = leaves(), b = leaves();
  Tensor ya = fused(a), yb = unfused(b);
  INFO(what);
  check_close(ya, yb, tol, tol);
  Generator gen(4);
  const Tensor gy = randn(ya.shape(), {.dtype = ya.dtype()}, &gen);
  sum(mul(ya, gy)).backward();
  sum(mul(yb, gy)).backward();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].defined()) {
      INFO("gradient of input " << i);
      check_close(a[i].grad(), b[i].grad(), tol, tol);
    }
}

}  // namespace

TEST_CASE("activation names round-trip, and an unknown one is an error that lists the known", "[fused][errors]") {
  for (Activation act : kActivations) CHECK(activation_from_name(activation_name(act)) == act);
  CHECK_THAT(error_of([] { activation_from_name("gelu"); }),
             Catch::Contains("'gelu'") && Catch::Contains("none, relu, sigmoid or tanh"));
  CHECK_THAT(error_of([] { activation_from_name(""); }), Catch::Contains("unknown name"));
}

TEST_CASE("linear with a fused activation equals the activation of linear", "[linear][fused]") {
  Generator gen(1);
  const Tensor x = randn({2, 7, 19}, {}, &gen), w = randn({23, 19}, {}, &gen), b = randn({23}, {}, &gen);
  for (Activation act : kActivations) {
    for (bool bias : {true, false}) {
      const std::string what = std::string("linear ") + activation_name(act) + (bias ? " with bias" : "");
      check_same_as_unfused([&](const TensorList& t) { return linear(t[0], t[1], t[2], act); },
                              [&](const TensorList& t) { return activate(linear(t[0], t[1], t[2]), act); },
                              {x, w, bias ? b : Tensor()}, 1e-5, what);
    }
  }
  REQUIRE(linear_relu(x, w, b).to_vector<float>() == relu(linear(x, w, b)).to_vector<float>());
}

TEST_CASE("conv2d with a fused activation equals the activation of conv2d", "[conv][fused]") {
  Generator gen(2);
  const Tensor x = randn({3, 4, 9, 8}, {}, &gen), w = randn({6, 2, 3, 2}, {}, &gen), b = randn({6}, {}, &gen);
  for (Activation act : kActivations) {
    for (bool bias : {true, false}) {
      const std::string what = std::string("conv2d ") + activation_name(act) + (bias ? " with bias" : "");
      check_same_as_unfused(
          [&](const TensorList& t) { return conv2d(t[0], t[1], t[2], {2, 1}, {1, 0}, {1, 2}, 2, act); },
          [&](const TensorList& t) { return activate(conv2d(t[0], t[1], t[2], {2, 1}, {1, 0}, {1, 2}, 2), act); },
          {x, w, bias ? b : Tensor()}, 1e-5, what);
    }
  }
}

TEST_CASE("fused linear and conv2d gradcheck in f64 for every activation", "[fused][gradcheck]") {
  Generator gen(3);
  auto f64 = [&](const Shape& s) { return randn(s, {.dtype = DType::f64}, &gen); };
  for (Activation act : kActivations) {
    INFO(activation_name(act));
    for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
      auto r = gradcheck([&](const TensorList& t) { return linear(t[0], t[1], t[2], act); },
                         {f64(xs), f64({5, 4}), f64({5})});
      INFO("linear " << shape_str(xs) << ": " << r.report);
      REQUIRE(r.ok);
    }
    auto r = gradcheck([&](const TensorList& t) { return linear(t[0], t[1], {}, act); }, {f64({3, 4}), f64({5, 4})});
    INFO("linear without bias: " << r.report);
    REQUIRE(r.ok);
    // Stride 2, padding, groups 2, a non-square kernel; and a depthwise one without bias.
    r = gradcheck([&](const TensorList& t) { return conv2d(t[0], t[1], t[2], 2, 1, 1, 2, act); },
                  {f64({2, 4, 5, 6}), f64({4, 2, 3, 2}), f64({4})});
    INFO("conv2d grouped: " << r.report);
    REQUIRE(r.ok);
    r = gradcheck([&](const TensorList& t) { return conv2d(t[0], t[1], {}, 1, 1, 2, 3, act); },
                  {f64({1, 3, 6, 5}), f64({3, 1, 2, 2})});
    INFO("conv2d depthwise dilated: " << r.report);
    REQUIRE(r.ok);
  }
}

TEST_CASE("bias_activation_backward: dz and db in one pass, for both bias layouts", "[fused]") {
  Generator gen(5);
  const Tensor z = randn({3, 5, 4, 2}, {.dtype = DType::f64}, &gen), dy = randn(z.shape(), {.dtype = DType::f64}, &gen);
  for (Activation act : kActivations) {
    INFO(activation_name(act));
    const Tensor y = activate(z, act);
    // The bias along dim 1 (a convolution) and along the last dim (a linear layer).
    for (int64_t dim : {1, 3}) {
      const auto [dz, db] = bias_activation_backward(dy, y, act, dim, true);
      Tensor expected_dz = dy;
      if (act == Activation::relu) expected_dz = relu_backward(dy, y);
      if (act == Activation::sigmoid) expected_dz = mul(dy, mul(y, neg(sub(y, 1.0))));
      if (act == Activation::tanh) expected_dz = mul(dy, neg(sub(mul(y, y), 1.0)));
      INFO("bias along dim " << dim);
      check_close(dz, expected_dz, 1e-14, 1e-14);
      const Dims others = dim == 1 ? Dims{0, 2, 3} : Dims{0, 1, 2};
      check_close(db, sum(expected_dz, others), 1e-12, 1e-12);
    }
    const auto [dz, db] = bias_activation_backward(dy, y, act, -1, false);
    REQUIRE_FALSE(db.defined());
    REQUIRE(dz.shape() == dy.shape());
  }
  // The linear layout split across tasks of column runs (1000 rows, 300 columns: five tasks).
  const Tensor dy_rows = randn({1000, 300}, {.dtype = DType::f64}, &gen);
  const Tensor y_rows = relu(randn({1000, 300}, {.dtype = DType::f64}, &gen));
  const auto [dz_rows, db_rows] = bias_activation_backward(dy_rows, y_rows, Activation::relu, 1, true);
  check_close(dz_rows, relu_backward(dy_rows, y_rows), 0, 0);
  check_close(db_rows, sum(relu_backward(dy_rows, y_rows), {0}), 1e-12, 1e-11);
  // A non-contiguous gradient is read through its strides.
  const Tensor dyt = randn({4, 3}, {.dtype = DType::f64}, &gen).t();
  const Tensor yt = relu(randn({3, 4}, {.dtype = DType::f64}, &gen));
  check_close(bias_activation_backward(dyt, yt, Activation::relu, 1, true).bias, sum(relu_backward(dyt, yt), {0}),
              1e-12, 1e-12);
  // Empty planes (Note [Channel stretches] divides by the plane's size): a zero bias gradient.
  const Tensor empty = zeros({2, 3, 0, 4});
  const auto [dz_empty, db_empty] = bias_activation_backward(empty, empty, Activation::relu, 1, true);
  CHECK(dz_empty.shape() == empty.shape());
  check_close(db_empty, zeros({3}), 0, 0);
}

// Note [Row sums in registers] (ops/cpu/bias_activation.cpp): f32 and bf16 rows of whole blocks
// of 16 and a tail (inner 63 and 784), NaN in y and dy: dz is act.backward on the widened
// values, rounded once (bf16 bit for bit, NaN where it is NaN), and db the sum of those rounded
// dz in the kernel's order of lanes, bit for bit.
TEST_CASE("bias_activation_backward in f32 bf16 and f16 rounds dz once and sums the rounded values", "[fused][bf16]") {
  Generator gen(15);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    // v rounded to dtype as the kernel rounds (T(v)), back in f64.
    auto rounded = [dtype](auto v) {
      if (dtype == DType::bf16) return double(float(BFloat16(v)));
      return dtype == DType::f16 ? double(float(Half(v))) : double(float(v));
    };
    for (const Shape& shape : {Shape{3, 5, 7, 9}, Shape{2, 4, 28, 28}}) {
      for (Activation act : kActivations) {
        INFO(dtype_name(dtype) << ", " << activation_name(act) << " on " << shape[2] << " x " << shape[3] << " planes");
        Tensor dy = randn(shape, {}, &gen), y = activate(randn(shape, {}, &gen), act);
        y.narrow(0, 0, 1).narrow(1, 1, 1).narrow(2, 0, 1).narrow(3, 3, 1).fill_(std::nan(""));
        dy.narrow(0, 1, 1).narrow(1, 2, 1).narrow(2, 1, 1).narrow(3, 0, 1).fill_(std::nan(""));
        dy = dy.to(dtype), y = y.to(dtype);
        const auto [dz, db] = bias_activation_backward(dy, y, act, 1, true);
        REQUIRE(dz.dtype() == dtype);
        const std::vector<double> g = dy.to(DType::f64).to_vector<double>(), yv = y.to(DType::f64).to_vector<double>();
        const std::vector<double> got = dz.to(DType::f64).to_vector<double>();
        const int64_t inner = shape[2] * shape[3];
        int64_t wrong = 0;
        for (size_t i = 0; i < g.size(); ++i) {
          const float exact = apply_activation_backward(act, float(g[i]), float(yv[i]));
          const float want = float(rounded(exact));
          // f32 within an ulp or so: the kernel's tanh and sigmoid backward may contract to an FMA.
          const double slack = dtype != DType::f32 ? 0.0 : 1e-6 * (std::abs(want) + std::abs(g[i]));
          wrong += std::isnan(want) ? !std::isnan(got[i]) : std::abs(got[i] - double(want)) > slack;
        }
        CHECK(wrong == 0);
        // db, bit for bit: the stored dz summed in the kernel's order (masked_row_sum): per row,
        // lane j adds the elements j mod 16 of the whole blocks, the tail is summed from zero and
        // the lanes added to it in order; the rows of a channel in double, rounded once.
        std::vector<double> sums(size_t(shape[1]), 0.0);
        for (int64_t row = 0; row < shape[0] * shape[1]; ++row) {
          const double* v = got.data() + row * inner;
          float lanes[16] = {}, total = 0;
          int64_t i = 0;
          for (; i + 16 <= inner; i += 16)
            for (int j = 0; j < 16; ++j) lanes[j] += float(v[i + j]);
          for (; i < inner; ++i) total += float(v[i]);
          for (float lane : lanes) total += lane;
          sums[size_t(row % shape[1])] += double(total);
        }
        const std::vector<double> db_got = db.to(DType::f64).to_vector<double>();
        for (size_t c = 0; c < sums.size(); ++c) {
          const double expected = rounded(sums[c]);
          INFO("channel " << c << ": " << db_got[c] << " against " << expected);
          if (std::isnan(expected)) CHECK(std::isnan(db_got[c]));
          else CHECK(db_got[c] == expected);
        }
      }
    }
  }
}

TEST_CASE("bias_activation_backward errors name the op and what was given", "[fused][errors]") {
  CHECK_THAT(error_of([] { bias_activation_backward(randn({2, 3}), randn({3, 2}), Activation::relu, 1, true); }),
             Catch::Contains("bias_activation_backward") && Catch::Contains("(2, 3)") && Catch::Contains("(3, 2)"));
  CHECK_THAT(error_of([] { bias_activation_backward(randn({2, 3}), Tensor(), Activation::tanh, 1, true); }),
             Catch::Contains("activated output") && Catch::Contains("none"));
  CHECK_THAT(error_of([] { bias_activation_backward(randn({2, 3}), randn({2, 3}), Activation::relu, 2, true); }),
             Catch::Contains("bias_activation_backward"));
  CHECK_THAT(error_of([] {
               bias_activation_backward(randn({2, 3}), randn({2, 3}, {.dtype = DType::f64}), Activation::relu, 1, true);
             }),
             Catch::Contains("bias_activation_backward") && Catch::Contains("dtype"));
}

TEST_CASE("bias_activation_backward writes dz into a donated gradient, never into a shared one", "[fused]") {
  const Tensor y = relu(randn({4, 6}));
  Tensor shared = randn({4, 6});
  const std::vector<float> before = shared.to_vector<float>();
  // The caller keeps `shared`: dz gets a buffer of its own and dy is left as it was.
  const BiasActivationGrad kept = bias_activation_backward(shared, y, Activation::relu, 1, true);
  CHECK_FALSE(kept.input.shares_storage(shared));
  CHECK(shared.to_vector<float>() == before);
  // Handed over (the only reference, contiguous): dz reuses dy's buffer, with the same values.
  Tensor donated = shared.clone();
  const void* buffer = donated.raw_data();
  REQUIRE(donated.is_exclusive());
  const BiasActivationGrad reused = bias_activation_backward(std::move(donated), y, Activation::relu, 1, true);
  CHECK(reused.input.raw_data() == buffer);
  CHECK(reused.input.to_vector<float>() == kept.input.to_vector<float>());
  CHECK(reused.bias.to_vector<float>() == kept.bias.to_vector<float>());
  // A view is never exclusive: its base shares the storage.
  CHECK_FALSE(shared.t().is_exclusive());
}

TEST_CASE("fused ops backpropagate twice with retain_graph (the saved output is kept)", "[fused]") {
  Tensor x = randn({2, 3, 5, 5}).requires_grad_();
  Tensor w = randn({4, 3, 3, 3}).requires_grad_();
  Tensor b = randn({4}).requires_grad_();
  Tensor fc = randn({2, 100}).requires_grad_();
  Tensor y = linear(conv2d(x, w, b, 1, 1, 1, 1, Activation::relu).flatten(1), fc, {}, Activation::tanh);
  Tensor loss = sum(y);
  loss.backward({}, /*retain_graph=*/true);
  const std::vector<float> first = w.grad().to_vector<float>();
  w.zero_grad();
  loss.backward();
  CHECK(w.grad().to_vector<float>() == first);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("retain_graph"));
}

TEST_CASE("batch_norm with a fused activation equals the activation of batch_norm", "[fused][batch_norm]") {
  Generator gen(6);
  for (const Shape& shape : {Shape{6, 4}, Shape{3, 4, 5, 3}}) {
    const Tensor x = randn(shape, {}, &gen), w = randn({4}, {}, &gen), b = randn({4}, {}, &gen);
    const Tensor rm = randn({4}, {}, &gen), rv = rand({4}, {}, &gen);
    for (Activation act : kActivations) {
      for (bool training : {true, false}) {
        for (bool affine : {true, false}) {
          const std::string what = std::string("batch_norm ") + shape_str(shape) + " " + activation_name(act) +
                                   (training ? " training" : " eval") + (affine ? " affine" : "");
          // Each side updates its own copy of the running stats; they must agree too.
          Tensor rm_fused = rm.clone(), rv_fused = rv.clone(), rm_plain = rm.clone(), rv_plain = rv.clone();
          check_same_as_unfused(
              [&](const TensorList& t) {
                return batch_norm(t[0], t[1], t[2], rm_fused, rv_fused, training, 0.1, 1e-5, act);
              },
              [&](const TensorList& t) {
                return activate(batch_norm(t[0], t[1], t[2], rm_plain, rv_plain, training, 0.1, 1e-5), act);
              },
              {x, affine ? w : Tensor(), affine ? b : Tensor()}, 1e-5, what);
          {
            INFO(what + ": running_mean");
            check_close(rm_fused, rm_plain, 0, 0);
          }
          {
            INFO(what + ": running_var");
            check_close(rv_fused, rv_plain, 0, 0);
          }
        }
      }
    }
  }
}

TEST_CASE("fused batch_norm gradcheck in f64 for every activation, training and eval", "[fused][batch_norm][gradcheck]") {
  Generator gen(8);
  auto f64 = [&](const Shape& s) { return randn(s, {.dtype = DType::f64}, &gen); };
  const Tensor rm = f64({3}), rv = add(rand({3}, {.dtype = DType::f64}, &gen), 0.5);
  for (Activation act : kActivations) {
    for (bool training : {true, false}) {
      INFO(activation_name(act) << (training ? " training" : " eval"));
      auto r = gradcheck(
          [&](const TensorList& t) {
            Tensor m = rm.clone(), v = rv.clone();  // the same stats in every evaluation
            return batch_norm(t[0], t[1], t[2], m, v, training, 0.1, 1e-5, act);
          },
          {f64({4, 3, 2, 2}), f64({3}), f64({3})});
      INFO(r.report);
      REQUIRE(r.ok);
    }
  }
}

TEST_CASE("batch_norm_backward with an activation needs the activated output", "[fused][batch_norm][errors]") {
  const Tensor x = randn({4, 3}), g = randn({4, 3}), mean = zeros({3}), invstd = ones({3});
  CHECK_THAT(error_of([&] { batch_norm_backward(g, x, {}, mean, invstd, true, true, true, true, Activation::relu); }),
             Catch::Contains("batch_norm_backward") && Catch::Contains("activated output") &&
                 Catch::Contains("relu") && Catch::Contains("none"));
  CHECK_THAT(error_of([&] {
               batch_norm_backward(g, x, {}, mean, invstd, true, true, true, true, Activation::tanh, randn({3, 4}));
             }),
             Catch::Contains("(4, 3)") && Catch::Contains("(3, 4)"));
}
