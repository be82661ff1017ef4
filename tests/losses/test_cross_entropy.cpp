// cross_entropy / nll_loss beyond the op table (tests/ops/test_op_table.cpp has their PyTorch
// values and gradients for every reduction, label smoothing, ignore_index and 4-D logits):
// cross_entropy == nll_loss(log_softmax), f64 gradchecks of every mode, huge logits, special
// cases, the backward op, and target and shape errors.
#include <cmath>

#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;
using ember::test::check_close;

namespace {

Tensor f64_randn(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, {.dtype = DType::f64}, &g), scale);
}

}  // namespace

TEST_CASE("cross_entropy equals nll_loss of log_softmax for every reduction") {
  Tensor x = f64_randn({5, 4}, 1), t = tensor<int64_t>({0, 3, -100, 2, 1});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    check_close(cross_entropy(x, t, r), nll_loss(log_softmax(x, 1), t, r), 1e-12, 1e-12);
}

TEST_CASE("cross_entropy and nll_loss gradcheck in every mode") {
  const Tensor t2 = tensor<int64_t>({1, 0, 3, -100, 2});
  const Tensor t4 = tensor<int64_t>({0, 2, 1, -100, 3, 3, 2, 0, 1, 2, 0, 1}, {2, 2, 3});
  struct Case {
    Shape shape;
    Tensor target;
  };
  for (const Case& c : {Case{{5, 4}, t2}, Case{{2, 4, 2, 3}, t4}}) {
    Tensor x = f64_randn(c.shape, 2, 2.0);
    for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
      for (double smoothing : {0.0, 0.15}) {
        INFO("shape " << shape_str(c.shape) << " reduction " << reduction_name(red) << " smoothing " << smoothing);
        auto r = gradcheck([&](const TensorList& in) { return cross_entropy(in[0], c.target, red, smoothing); }, {x});
        INFO(r.report);
        REQUIRE(r.ok);
      }
      auto r = gradcheck([&](const TensorList& in) { return nll_loss(in[0], c.target, red); }, {x});
      INFO(r.report);
      REQUIRE(r.ok);
    }
  }
  // A custom ignore_index that is a valid class id.
  Tensor x = f64_randn({4, 3}, 3);
  auto r = gradcheck([](const TensorList& in) {
    return cross_entropy(in[0], tensor<int64_t>({0, 1, 2, 1}), Reduction::mean, 0.0, /*ignore_index=*/1);
  }, {x});
  REQUIRE(r.ok);
  REQUIRE(cross_entropy(x, tensor<int64_t>({0, 1, 2, 1}), Reduction::none, 0.0, 1).to_vector<double>()[1] == 0.0);
}

TEST_CASE("cross_entropy of huge logits is finite and exact") {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor x = tensor<double>({1e4, 0, -1e4, 1e4, 1e4, -1e4}, {2, 3}).to(dtype).requires_grad_();
    Tensor loss = cross_entropy(x, tensor<int64_t>({2, 0}), Reduction::none);
    check_close(loss, tensor<double>({2e4, std::log(2.0)}), 1e-6, 1e-6);
    sum(loss).backward();
    check_close(x.grad(), tensor<double>({1, 0, -1, -0.5, 0.5, 0}, {2, 3}), 1e-6, 1e-6);
  }
}

TEST_CASE("cross_entropy special cases: all ignored, one sample, the backward op") {
  Tensor x = f64_randn({3, 4}, 4);
  Tensor ignored = tensor<int64_t>({-100, -100, -100});
  REQUIRE(std::isnan(cross_entropy(x, ignored).item()));
  REQUIRE(cross_entropy(x, ignored, Reduction::sum).item() == 0.0);
  // (C) logits with a 0-d target.
  Tensor one = cross_entropy(x.select(0, 1), tensor<int64_t>({2}, Shape{}));
  REQUIRE(one.item() == Approx(cross_entropy(x, tensor<int64_t>({0, 2, 1}), Reduction::none).to_vector<double>()[1]));
  // The backward op: softmax - one_hot, scaled per row.
  Tensor t = tensor<int64_t>({3, 0, 1});
  Tensor lse = logsumexp(x, {1});
  Tensor g = tensor<double>({1.0, 2.0, -1.0});
  Tensor expected = mul(sub(softmax(x, 1), one_hot(t, 4, DType::f64)), g.unsqueeze(1));
  check_close(cross_entropy_backward(g, x, t, lse), expected, 1e-14, 1e-14);
}

TEST_CASE("cross_entropy and nll_loss reject bad targets and shapes") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(cross_entropy(x, tensor<int64_t>({0, 3})),
                      Catch::Contains("cross_entropy: target 3 is out of range for 3 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(x, tensor<int64_t>({-1, 0})), Catch::Contains("target -1"));
  REQUIRE_THROWS_WITH(nll_loss(x, tensor<int64_t>({0, 7})),
                      Catch::Contains("nll_loss: target 7 is out of range for 3 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(x, tensor<float>({0, 1})), Catch::Contains("i64") && Catch::Contains("f32"));
  REQUIRE_THROWS_WITH(cross_entropy(x, tensor<int64_t>({0, 1, 2})),
                      Catch::Contains("expected target of shape (2,)") && Catch::Contains("got (3,)"));
  REQUIRE_THROWS_WITH(cross_entropy(zeros({2, 3, 4}), tensor<int64_t>({0, 1})), Catch::Contains("(2, 4)"));
  REQUIRE_THROWS_WITH(cross_entropy(x, tensor<int64_t>({0, 1}), Reduction::mean, 1.5),
                      Catch::Contains("label_smoothing") && Catch::Contains("1.5"));
  REQUIRE_THROWS_WITH(cross_entropy(ones({2, 3}, {.dtype = DType::i64}), tensor<int64_t>({0, 1})),
                      Catch::Contains("floating"));
}
