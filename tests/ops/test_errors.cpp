// Every failure a user can cause is an ember::Error whose message names the op, what was
// expected and what was given. These tests pin the messages users see.
#include "support/test_support.h"

using namespace ember;
using Catch::Contains;

TEST_CASE("errors: shape mismatches name the op and both shapes", "[ops][errors]") {
  REQUIRE_THROWS_MATCHES(add(ones({2, 3}), ones({4, 3})), Error,
                         Catch::Matchers::Message("add: shapes (2, 3) and (4, 3) cannot be broadcast together "
                                                  "(dim 0: 2 vs 4)"));
  REQUIRE_THROWS_WITH(matmul(ones({3, 4}), ones({5, 6})),
                      "matmul: shapes (3, 4) and (5, 6) cannot be multiplied (4 != 5)");
  REQUIRE_THROWS_WITH(matmul(ones({2, 3, 4}), ones({3, 4, 5})), Contains("matmul (batch dims): shapes (2,) and (3,)"));
  REQUIRE_THROWS_WITH(matmul(ones({}), ones({3})), Contains("matmul: both operands need at least one dim"));
  REQUIRE_THROWS_WITH(mul(ones({3}), ones({4})), Contains("mul: shapes (3,) and (4,)"));
  REQUIRE_THROWS_WITH(ones({2, 3}).expand({4, 4}), Contains("expand: cannot expand shape (2, 3) to (4, 4)"));
  REQUIRE_THROWS_WITH(zeros({2, 3}).copy_(ones({3, 3})), Contains("copy_"));
  REQUIRE_THROWS_WITH(stack({ones({2}), ones({3})}), Contains("stack: tensor 1 has shape (3,), expected (2,)"));
}

TEST_CASE("errors: dtype mismatches name both dtypes", "[ops][errors]") {
  Tensor f = ones({3}), d = ones({3}, {.dtype = DType::f64});
  REQUIRE_THROWS_WITH(add(f, d), Contains("add: expected tensors of one dtype, got f32 and f64"));
  REQUIRE_THROWS_WITH(matmul(f, d), Contains("matmul: expected tensors of one dtype, got f32 and f64"));
  REQUIRE_THROWS_WITH(where(ones({3}), f, f), Contains("where: condition must be bool, got f32"));
  REQUIRE_THROWS_WITH(exp(ones({3}, {.dtype = DType::i64})), "exp: expected a floating tensor, got i64");
  REQUIRE_THROWS_WITH(matmul(ones({2, 2}, {.dtype = DType::i64}), ones({2, 2}, {.dtype = DType::i64})),
                      Contains("matmul: expected floating tensors, got i64"));
  REQUIRE_THROWS_WITH(sum(ones({2}, {.dtype = DType::boolean})), Contains("sum: expected a numeric tensor, got bool"));
  REQUIRE_THROWS_WITH(f.data<double>(), Contains("data: tensor has dtype f32, requested f64"));
  REQUIRE_THROWS_WITH(ones({2}, {.dtype = DType::i64}).requires_grad_(),
                      Contains("requires_grad_: only floating tensors can require grad, got i64"));
}

TEST_CASE("errors: dims out of range give the valid range", "[ops][errors]") {
  Tensor x = ones({2, 3});
  REQUIRE_THROWS_WITH(sum(x, {2}), "sum: dim 2 is out of range for a tensor of rank 2 (expected a dim in [-2, 1])");
  REQUIRE_THROWS_WITH(x.transpose(0, -3), Contains("transpose: dim -3 is out of range"));
  REQUIRE_THROWS_WITH(x.size(5), Contains("size: dim 5 is out of range"));
  REQUIRE_THROWS_WITH(x.unsqueeze(4), Contains("unsqueeze: dim 4 is out of range"));
  REQUIRE_THROWS_WITH(max(x, 2), Contains("max: dim 2 is out of range"));
  REQUIRE_THROWS_WITH(x.select(1, 3), Contains("select: index 3 is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(x.narrow(1, 2, 2), Contains("narrow: range [2, 4) is out of bounds for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(x.permute({0, 0}), Contains("permute: dim 0 repeats in (0, 0)"));
  REQUIRE_THROWS_WITH(sum(x, {0, -2}), Contains("sum: dim -2 appears more than once"));
}

TEST_CASE("errors: bad reshape and view", "[ops][errors]") {
  Tensor x = ones({2, 3});
  REQUIRE_THROWS_WITH(x.reshape({4, 2}),
                      "reshape: shape (4, 2) is invalid for an input of shape (2, 3) (6 elements)");
  REQUIRE_THROWS_WITH(x.reshape({-1, -1}), Contains("reshape: only one dim can be -1"));
  REQUIRE_THROWS_WITH(x.reshape({4, -1}), Contains("reshape: shape (4, -1) is invalid for 6 elements"));
  REQUIRE_THROWS_WITH(x.t().view({6}), Contains("view: shape (6,) is incompatible with the input's layout") &&
                                           Contains("use reshape()"));
  REQUIRE(x.t().reshape({6}).numel() == 6);  // reshape copies where view cannot
}

TEST_CASE("errors: indices out of range name the op, the index and the size", "[ops][errors]") {
  Tensor x = ones({3, 4});
  REQUIRE_THROWS_WITH(index_select(x, 1, tensor<int64_t>({0, 4})),
                      "index_select: index 4 is out of range for a dim of size 4");
  REQUIRE_THROWS_WITH(index_select(x, 0, tensor<int64_t>({-4})), Contains("index_select: index -4 is out of range"));
  REQUIRE_THROWS_WITH(gather(x, 1, tensor<int64_t>({0, 7, 1, 1}, {2, 2})),
                      "gather: index 7 is out of range for a dim of size 4");
  REQUIRE_THROWS_WITH(scatter_add(x, 0, tensor<int64_t>({3}, {1, 1}), ones({1, 1})),
                      Contains("scatter_add: index 3 is out of range for a dim of size 3"));
  REQUIRE_THROWS_WITH(index_select(x, 0, tensor<int32_t>({0})), Contains("index_select: index must be i64, got i32"));
  // A bad index deep inside a parallel loop still surfaces as the same Error.
  Tensor big = zeros({200000, 2});
  std::vector<int64_t> idx(200000, 0);
  idx[123456] = 5;
  REQUIRE_THROWS_WITH(gather(big, 1, tensor<int64_t>(idx, {200000, 1})), Contains("gather: index 5 is out of range"));
}

TEST_CASE("errors: cat of mismatched shapes", "[ops][errors]") {
  REQUIRE_THROWS_WITH(cat({ones({3, 3}), ones({2, 2})}, 0),
                      "cat: tensor 1 has shape (2, 2), expected (3, 3) except in dim 0");
  REQUIRE_THROWS_WITH(cat({ones({3}), ones({3, 1})}), Contains("cat: tensor 1 has rank 2, expected 1"));
  REQUIRE_THROWS_WITH(cat({}), Contains("cat: expected at least one tensor"));
  REQUIRE_THROWS_WITH(cat({ones({2}), ones({2}, {.dtype = DType::f64})}), Contains("cat: expected tensors of one dtype"));
}

TEST_CASE("errors: item() needs exactly one element", "[ops][errors]") {
  REQUIRE_THROWS_WITH(ones({2, 3}).item(), "item: expected a tensor with one element, got shape (2, 3)");
  REQUIRE_THROWS_WITH(ones({0}).item(), Contains("got shape (0,)"));
  REQUIRE(ones({1, 1}).item() == 1.0);
}

TEST_CASE("errors: autograd misuse", "[ops][errors][autograd]") {
  SECTION("backward on a non-scalar without a gradient") {
    Tensor x = ones({2, 3}, {.requires_grad = true});
    REQUIRE_THROWS_WITH(mul(x, 2.0).backward(),
                        Contains("backward: a gradient can be created implicitly only for a one-element output") &&
                            Contains("(2, 3)"));
  }
  SECTION("backward on a tensor that does not require grad") {
    REQUIRE_THROWS_WITH(ones({1}).backward(), Contains("backward: the tensor does not require grad"));
  }
  SECTION("backward with a gradient of the wrong shape") {
    Tensor x = ones({2, 3}, {.requires_grad = true});
    REQUIRE_THROWS_WITH(mul(x, 2.0).backward(ones({3, 2})),
                        Contains("backward: gradient has shape (3, 2) but the output has shape (2, 3)"));
  }
  SECTION("backward with a gradient of the wrong dtype") {
    // Caught at the seed, not later as a confusing mismatch inside the first node.
    Tensor x = ones({2}, {.requires_grad = true});
    REQUIRE_THROWS_WITH(mul(x, 2.0).backward(ones({2}, {.dtype = DType::f64})),
                        "backward: gradient has dtype f64 but the output has dtype f32");
  }
  SECTION("in-place write to a leaf that requires grad") {
    Tensor x = ones({3}, {.requires_grad = true});
    REQUIRE_THROWS_WITH(x.fill_(2.0), Contains("fill_: in-place write to a tensor that requires grad"));
    REQUIRE_THROWS_WITH(x.add_(ones({3})), Contains("add_: in-place write"));
    REQUIRE_THROWS_WITH(x.mul_(2.0), Contains("mul_: in-place write"));
    REQUIRE_THROWS_WITH(x.copy_(ones({3})), Contains("copy_: in-place write"));
    autograd::NoGradGuard no_grad;  // the documented way to do it
    x.fill_(2.0);
    REQUIRE(x.to_vector<float>() == std::vector<float>{2, 2, 2});
  }
  SECTION("modifying a saved tensor before backward") {
    Tensor x = ones({3}, {.requires_grad = true});
    Tensor c = full({3}, 2.0);
    Tensor y = sum(mul(x, c));  // mul saves c for x's gradient
    c.fill_(5.0);
    REQUIRE_THROWS_WITH(y.backward(), Contains("mul: a tensor saved for backward was modified in place") &&
                                          Contains("version 0 -> 1"));
  }
  SECTION("modifying a saved output through a detached alias") {
    Tensor x = ones({3}, {.requires_grad = true});
    Tensor e = exp(x);  // exp saves its output
    e.detach().mul_(2.0);
    REQUIRE_THROWS_WITH(sum(e).backward(), Contains("exp: a tensor saved for backward was modified in place"));
  }
  SECTION("backward twice without retain_graph") {
    Tensor x = ones({3}, {.requires_grad = true});
    Tensor y = sum(exp(x));
    y.backward();
    REQUIRE_THROWS_WITH(y.backward(), Contains("was already freed by an earlier backward()") &&
                                          Contains("retain_graph=true"));
  }
  SECTION("requires_grad_ on a non-leaf") {
    Tensor x = ones({3}, {.requires_grad = true});
    Tensor y = exp(x);
    REQUIRE_THROWS_WITH(y.requires_grad_(false), Contains("requires_grad_: only leaf tensors") && Contains("'exp'"));
  }
}

TEST_CASE("errors: undefined tensors and bad creation arguments", "[ops][errors]") {
  Tensor undefined;
  REQUIRE_THROWS_WITH(undefined.shape(), Contains("use of an undefined tensor"));
  REQUIRE_THROWS_WITH(empty({2, -1}), Contains("empty: sizes must be non-negative, got (2, -1)"));
  REQUIRE_THROWS_WITH(arange(0, 5, 0), Contains("arange: step must be finite and non-zero"));
  REQUIRE_THROWS_WITH(randint(3, 3, {2}), Contains("randint: expected low < high, got [3, 3)"));
  REQUIRE_THROWS_WITH(clamp(ones({2}), 1.0, 0.0), Contains("clamp: expected lo <= hi, got 1 > 0"));
  REQUIRE_THROWS_WITH(amax(ones({0, 3}), {0}), Contains("amax: cannot reduce over an empty dim"));
}

TEST_CASE("errors: ops that index a dim refuse 0-d tensors instead of reading past the shape",
          "[ops][errors][scalar]") {
  Tensor s = full({}, 1.0);
  REQUIRE_THROWS_WITH(s.size(0), Contains("size: expected a tensor with at least one dim, got a 0-d tensor"));
  REQUIRE_THROWS_WITH(s.stride(-1), Contains("stride: expected a tensor with at least one dim"));
  REQUIRE_THROWS_WITH(s.narrow(0, 0, 1), Contains("narrow: expected a tensor with at least one dim"));
  REQUIRE_THROWS_WITH(s.select(0, 0), Contains("select: expected a tensor with at least one dim"));
  REQUIRE_THROWS_WITH(s.slice(0, 0, 1), Contains("slice: expected a tensor with at least one dim"));
  REQUIRE_THROWS_WITH(cat({s, s}), Contains("cat: expected tensors with at least one dim, got a 0-d tensor"));
  REQUIRE_THROWS_WITH(split(s, 1), Contains("split: expected a tensor with at least one dim"));
  REQUIRE_THROWS_WITH(chunk(s, 1), Contains("chunk: expected a tensor with at least one dim"));
  // What a 0-d tensor does support: dim 0 / -1 in reductions, unsqueeze, squeeze, transpose(0, 0).
  CHECK(s.transpose(0, -1).dim() == 0);
  CHECK(s.squeeze(0).dim() == 0);
  CHECK(s.unsqueeze(-1).shape() == Shape{1});
  CHECK(stack({s, s}).shape() == Shape{2});
}

// Note [one_hot negatives] (ops/index_ops.cpp).
TEST_CASE("errors: one_hot refuses negative classes instead of wrapping them", "[ops][errors]") {
  REQUIRE_THROWS_WITH(one_hot(tensor<int64_t>({1, -1}), 3), Contains("one_hot: classes are in [0, 3), got a negative label -1"));
  REQUIRE_THROWS_WITH(one_hot(tensor<int64_t>({3}), 3), Contains("out of range"));
  CHECK(one_hot(tensor<int64_t>({2}), 3).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
}

// Issue #12: max, min, amax, amin, arg-reductions and the inf-norm have no identity, so an empty
// reduced dim is an error (as in PyTorch) that names the op, what it expected and what it got.
TEST_CASE("errors: reductions without an identity refuse an empty dim, naming the op", "[ops][errors]") {
  Tensor e = zeros({2, 0});
  REQUIRE_THROWS_MATCHES(amax(e, {1}), Error,
                         Catch::Matchers::Message("amax: cannot reduce over an empty dim (the reduction has no "
                                                  "identity): expected every reduced dim to be non-empty, got input "
                                                  "shape (2, 0) reducing dims (1,)"));
  REQUIRE_THROWS_WITH(amin(zeros({0, 3, 2}), {0, 2}), Contains("amin: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(amin(zeros({0, 3, 2}), {0, 2}), Contains("got input shape (0, 3, 2) reducing dims (0, 2)"));
  REQUIRE_THROWS_WITH(max(e, 1), Contains("max: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(min(e, -1, true), Contains("min: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(max(e), Contains("max: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(min(e), Contains("min: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(argmax(e, 1), Contains("argmax: cannot reduce over an empty dim"));
  REQUIRE_THROWS_WITH(norm(e, std::numeric_limits<double>::infinity(), {1}),
                      Contains("norm (p = inf): cannot reduce over an empty dim"));
  // A 0-d tensor takes dim 0 / -1 in max(x, dim) (see "values: reductions of empty and 0-d
  // tensors"); any other dim names the op and the valid range.
  REQUIRE_THROWS_WITH(max(full({}, 3.0), 1),
                      "max: dim 1 is out of range for a tensor of rank 0 (expected a dim in [-1, 0])");
  REQUIRE_THROWS_WITH(min(full({}, 3.0), -2), Contains("min: dim -2 is out of range for a tensor of rank 0"));
  REQUIRE_THROWS_WITH(logsumexp(full({}, 3.0), {1}), Contains("logsumexp: dim 1 is out of range"));
  REQUIRE_THROWS_WITH(stddev(ones({3}, {.dtype = DType::i64})), "stddev: expected a floating tensor, got i64");
}
