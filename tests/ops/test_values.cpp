// Values of the ops the op table does not differentiate: comparisons, arg-reductions, creation,
// in-place writes, integer arithmetic, numerically extreme inputs and the parallel paths.
#include <cmath>
#include <limits>

#include "support/test_support.h"

using namespace ember;

namespace {
Tensor vec(std::vector<float> v) { return tensor<float>(v); }
std::vector<bool> bools(const Tensor& t) { return t.to_vector<bool>(); }
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("values: comparisons broadcast and return bool", "[ops][values]") {
  Tensor a = vec({1, 2, 3}), b = tensor<float>({2, 2, 2}, {3, 1});
  Tensor lt_ab = lt(a, b);
  CHECK(lt_ab.dtype() == DType::boolean);
  CHECK(lt_ab.shape() == Shape{3, 3});
  CHECK(bools(lt_ab.select(0, 0)) == std::vector<bool>{true, false, false});
  CHECK(bools(eq(a, 2.0)) == std::vector<bool>{false, true, false});
  CHECK(bools(ne(a, 2.0)) == std::vector<bool>{true, false, true});
  CHECK(bools(le(a, 2.0)) == std::vector<bool>{true, true, false});
  CHECK(bools(gt(a, 2.0)) == std::vector<bool>{false, false, true});
  CHECK(bools(ge(a, 2.0)) == std::vector<bool>{false, true, true});
  CHECK(bools(logical_not(gt(a, 2.0))) == std::vector<bool>{true, true, false});
  CHECK(sign(vec({-3, 0, 2})).to_vector<float>() == std::vector<float>{-1, 0, 1});
  CHECK(bools(eq(tensor<int64_t>({1, 5}), tensor<int64_t>({1, 4}))) == std::vector<bool>{true, false});
}

TEST_CASE("values: arg-reductions take the first extreme, and NaN wins", "[ops][values]") {
  Tensor x = tensor<float>({1, 5, 5, 0, -2, 7, 7, -2}, {2, 4});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(argmin(x, 1).to_vector<int64_t>() == std::vector<int64_t>{3, 0});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 4});
  CHECK(argmax(x).item() == 5.0);  // into the flattened tensor
  auto [values, indices] = max(x, 0);
  CHECK(values.to_vector<float>() == std::vector<float>{1, 7, 7, 0});
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  Tensor n = vec({1, NAN, 3});
  CHECK(argmax(n, 0).item() == 1.0);
  CHECK(std::isnan(amax(n).item()));
  CHECK(std::isnan(min(n).item()));
  CHECK(std::isnan(maximum(n, vec({0, 0, 0})).to_vector<float>()[1]));
  CHECK(prod(tensor<float>({1, 2, 3, 4}, {2, 2}), {1}).to_vector<float>() == std::vector<float>{2, 12});
}

TEST_CASE("values: creation", "[ops][values][creation]") {
  CHECK(arange(5.0).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(arange(1, 2, 0.25).to_vector<float>() == std::vector<float>{1, 1.25, 1.5, 1.75});
  CHECK(arange(3, 0, -1).to_vector<float>() == std::vector<float>{3, 2, 1});
  CHECK(arange(0, 5, 2, {.dtype = DType::i64}).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4});
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0, 0.25, 0.5, 0.75, 1});
  CHECK(linspace(2, 3, 1).to_vector<float>() == std::vector<float>{2});
  CHECK(eye(2, 3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
  CHECK(eye(3, 2).to_vector<float>() == std::vector<float>{1, 0, 0, 1, 0, 0});
  CHECK(full({2}, 1.5, {.dtype = DType::f64}).to_vector<double>() == std::vector<double>{1.5, 1.5});
  CHECK(zeros_like(ones({2}, {.dtype = DType::i32})).to_vector<int32_t>() == std::vector<int32_t>{0, 0});
  Tensor r = ones({2}, {.requires_grad = true});
  CHECK(r.requires_grad());
  CHECK(r.is_leaf());
  Tensor h = one_hot(tensor<int64_t>({2, 0}), 3);
  CHECK(h.shape() == Shape{2, 3});
  CHECK(h.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 1, 0, 0});
}

TEST_CASE("values: in-place writes broadcast, convert and bump the version", "[ops][values][inplace]") {
  Tensor x = zeros({2, 3});
  x.add_(vec({1, 2, 3}));
  x.add_(vec({1, 1, 1}), -2.0);
  CHECK(x.to_vector<float>() == std::vector<float>{-1, 0, 1, -1, 0, 1});
  x.mul_(3.0);
  CHECK(x.to_vector<float>() == std::vector<float>{-3, 0, 3, -3, 0, 3});
  x.copy_(tensor<int64_t>({7, 8, 9}));  // broadcast and i64 -> f32
  CHECK(x.to_vector<float>() == std::vector<float>{7, 8, 9, 7, 8, 9});
  x.t().select(0, 1).fill_(-1.0);  // through a non-contiguous view
  CHECK(x.to_vector<float>() == std::vector<float>{7, -1, 9, 7, -1, 9});
  CHECK(x.version() == 5);
  Tensor y = zeros({3});
  y.copy_(arange(6.0).slice(0, 0, 6, 2));  // strided source
  CHECK(y.to_vector<float>() == std::vector<float>{0, 2, 4});
}

TEST_CASE("values: integer arithmetic stays integral", "[ops][values]") {
  Tensor a = tensor<int64_t>({-3, 4, 7}), b = tensor<int64_t>({2, 2, 2});
  CHECK(add(a, b).to_vector<int64_t>() == std::vector<int64_t>{-1, 6, 9});
  CHECK(mul(a, b).to_vector<int64_t>() == std::vector<int64_t>{-6, 8, 14});
  CHECK(abs(a).to_vector<int64_t>() == std::vector<int64_t>{3, 4, 7});
  CHECK(relu(a).to_vector<int64_t>() == std::vector<int64_t>{0, 4, 7});
  CHECK(sum(a).item() == 8.0);
  CHECK(sum(a).dtype() == DType::i64);
  CHECK(amax(a).item() == 7.0);
  const int64_t big = (int64_t(1) << 53) + 1;  // not representable in double: no round trip
  CHECK(sum(tensor<int64_t>({big, 0})).to_vector<int64_t>()[0] == big);
}

TEST_CASE("values: extreme inputs stay finite", "[ops][values]") {
  CHECK(softplus(vec({30, -30, 0})).to_vector<float>()[0] == 30.0f);
  CHECK(softplus(vec({-100})).item() >= 0.0);
  CHECK(sigmoid(vec({-100, 100})).to_vector<float>() == std::vector<float>{0, 1});
  CHECK(tanh(vec({-50, 50})).to_vector<float>() == std::vector<float>{-1, 1});
  Tensor lse = logsumexp(tensor<float>({1000, 1000, -float(kInf), -float(kInf)}, {2, 2}), {1});
  CHECK(lse.to_vector<float>()[0] == Approx(1000 + std::log(2.0)));
  CHECK(lse.to_vector<float>()[1] == -kInf);
  CHECK(norm(zeros({3})).item() == 0.0);
  Tensor z = zeros({3}).requires_grad_();
  norm(z).backward();  // the 2-norm's gradient at zero is zero, not NaN
  CHECK(z.grad().to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(gelu(vec({-10, 0, 10})).to_vector<float>()[2] == Approx(10.0));
}

TEST_CASE("values: large tensors take the parallel paths and agree with serial sums", "[ops][values][parallel]") {
  const int64_t n = 1 << 20;
  Tensor x = arange(double(n), {.dtype = DType::f64});
  CHECK(sum(x).item() == double(n) * double(n - 1) / 2);
  Tensor m = x.reshape({1024, 1024});
  Tensor col = sum(m, {0});  // inner-dim reduction (outer * inner parallel split)
  CHECK(col.to_vector<double>()[5] == 1024.0 * 5 + 1024.0 * 1023 / 2 * 1024);
  Tensor row = sum(m.t(), {1});  // non-contiguous input: the permute-and-copy path
  CHECK(row.to_vector<double>()[5] == col.to_vector<double>()[5]);
  Tensor y = add(m, m.t());  // a transposed operand in a big elementwise loop
  CHECK(y.select(0, 3).select(0, 7).item() == (3 * 1024 + 7) + (7 * 1024 + 3));
  Tensor ones_f32 = ones({3000000});
  CHECK(sum(ones_f32).item() == 3000000.0);  // f32 sums accumulate in double
  Tensor big = randn({300, 200});
  test::check_close(matmul(big, big.t()).select(0, 17).select(0, 17), sum(square(big.select(0, 17))), 1e-4, 1e-3);
}

// Issue #12: what PyTorch 1.13 returns for empty reductions and for reductions of a 0-d tensor.
TEST_CASE("values: reductions of empty and 0-d tensors follow PyTorch", "[ops][values]") {
  Tensor e = zeros({2, 0}, {.dtype = DType::f64}).requires_grad_();
  CHECK(sum(e, {1}).to_vector<double>() == std::vector<double>{0, 0});
  CHECK(std::isnan(mean(e, {1}).to_vector<double>()[0]));
  CHECK(std::isnan(var(e, {1}).to_vector<double>()[1]));
  Tensor lse = logsumexp(e, {1});  // log of an empty sum: -inf, as PyTorch
  CHECK(lse.to_vector<double>() == std::vector<double>{-kInf, -kInf});
  sum(lse).backward();
  CHECK(e.grad().shape() == Shape{2, 0});
  CHECK(logsumexp(zeros({0, 3}), {1}).shape() == Shape{0});

  Tensor s = full({}, 3.0, {.dtype = DType::f64}).requires_grad_();
  auto [values, indices] = max(s, 0);  // a 0-d tensor is its own max, at index 0
  CHECK(values.dim() == 0);
  CHECK(values.item() == 3.0);
  CHECK(indices.dim() == 0);
  CHECK(indices.item() == 0.0);
  mul(values, 2.0).backward();
  CHECK(s.grad().item() == 2.0);
  CHECK(min(s, -1, true).values.dim() == 0);
  CHECK(argmax(s, 0).item() == 0.0);
}

// Issue #12: a gradient that reaches a singular point through several ops stays finite where
// PyTorch's does (the op table checks each op alone against PyTorch's fixtures).
TEST_CASE("values: gradients at singular points are 0 where PyTorch's are", "[ops][values]") {
  Tensor x = zeros({2, 3}, {.dtype = DType::f64}).requires_grad_();  // constant rows, zero norms, 0^0
  sum(add(add(stddev(x, {1}), norm(x, 3.0, {1})), sum(pow(x, 0.0), {1}))).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0});
  Tensor m = tensor<double>({NAN, 1.0}).requires_grad_();
  sum(mul(clamp(m, 0.0, 2.0), tensor<double>({kInf, kInf}))).backward();
  CHECK(m.grad().to_vector<double>() == std::vector<double>{0, kInf});
}
