// Reduction kernels on cuda (ops/cuda/reduce.cu) against the CPU: the row kernel (warp per
// row, block per row), the column kernel (inner > 1), every op and dtype, NaN and ties.
// Note [Float accumulation] tolerance: the device sums f32 in f32 with a tree, the CPU in
// double; for these sizes (<= 5000 terms of magnitude ~1) the relative difference stays below
// 1e-6, the absolute below 1e-5 where a sum cancels to near zero.
#include <cmath>
#include <limits>

#include "cuda_ops_support.h"

using namespace ember;
using test::check_equal;
using test::check_matches;
using test::kCuda;
using test::Layout;
using test::on_cuda;

namespace {
Generator gen(77);
}

TEST_CASE("cuda: sum, amax, amin, prod over each dim equal the CPU's (row and column kernels)") {
  Tensor x = randn({3, 37, 5}, {}, &gen);
  for (Layout layout : test::kLayouts) {
    Tensor dx = on_cuda(x, layout);
    for (int64_t d : {0, 1, 2}) {
      INFO(test::layout_name(layout) << ", dim " << d);
      check_matches(sum(dx, {d}), sum(x, {d}), 1e-6, 1e-5);
      check_matches(amax(dx, {d}), amax(x, {d}), 0, 0);
      check_matches(amin(dx, {d}, true), amin(x, {d}, true), 0, 0);
    }
    check_matches(sum(dx, {0, 2}), sum(x, {0, 2}), 1e-6, 1e-5);
    check_matches(mean(dx, {1}), mean(x, {1}), 1e-6, 1e-6);
  }
  Tensor p = add(mul(rand({3, 21}, {}, &gen), 0.5), 0.75);
  check_matches(prod(on_cuda(p), {1}), prod(p, {1}), 1e-5, 0);
  check_matches(prod(on_cuda(p), {0}), prod(p, {0}), 1e-6, 0);
}

TEST_CASE("cuda: a full reduction of a long row takes the block-per-row kernel") {
  Tensor x = randn({5003}, {}, &gen);
  check_matches(sum(on_cuda(x)), sum(x), 1e-6, 1e-5);
  check_matches(max(on_cuda(x)), max(x), 0, 0);
  Tensor y = randn({3, 1100}, {.dtype = DType::f64}, &gen);
  check_matches(sum(on_cuda(y), {1}), sum(y, {1}), 1e-13, 1e-12);
  check_equal<int64_t>(argmax(on_cuda(y), 1), argmax(y, 1));
}

TEST_CASE("cuda: integer reductions are exact") {
  for (DType dt : {DType::i64, DType::i32, DType::u8}) {
    INFO(dtype_name(dt));
    Tensor x = randint(0, 9, {4, 45, 3}, {.dtype = DType::i64}, &gen).to(dt);
    test::check_close(sum(on_cuda(x), {1}), sum(x, {1}), 0, 0);
    test::check_close(amax(on_cuda(x), {2}), amax(x, {2}), 0, 0);
    test::check_close(amin(on_cuda(x, Layout::permuted), {0}), amin(x, {0}), 0, 0);
  }
}

TEST_CASE("cuda: max/min along a dim: values and first indices, ties and NaN as the CPU") {
  // Ties everywhere: small integers as floats.
  Tensor x = randint(0, 4, {4, 37, 3}, {.dtype = DType::i64}, &gen).to(DType::f32);
  for (int64_t d : {0, 1, 2}) {
    INFO("dim " << d);
    auto [v, i] = max(on_cuda(x), d);
    auto [cv, ci] = max(x, d);
    check_equal<float>(v, cv);
    check_equal<int64_t>(i, ci);
    check_equal<int64_t>(argmin(on_cuda(x, Layout::permuted), d), argmin(x, d));
  }
  // NaN wins (the first one), also over the column kernel.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = tensor<float>({1, nan, 3, nan, 2, 5, 0, 9, 9, 1, 9, -4}, {2, 6});
  check_equal<int64_t>(argmax(on_cuda(y), 1), argmax(y, 1));
  check_equal<int64_t>(argmin(on_cuda(y), 1), argmin(y, 1));
  check_equal<int64_t>(argmax(on_cuda(y), 0), argmax(y, 0));
  CHECK(argmax(y, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(std::isnan(amax(on_cuda(y)).item()));
  Tensor flat = randint(0, 100, {41}, {.dtype = DType::i64}, &gen);
  check_equal<int64_t>(argmax(on_cuda(flat)), argmax(flat));
}

// Issue #12: NaN and +-inf through every reduction kernel as through the CPU's: a NaN anywhere in
// a long row (block per row), in a warp's last lane, or in a column (column kernel) makes
// max/min NaN and wins the index; inf - inf in a sum is NaN; logsumexp of a +inf row is +inf.
TEST_CASE("cuda: NaN and infinities propagate through the reduction kernels as on the CPU") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    Tensor x = randn({3, 1100}, {.dtype = DType::f64}, &gen);
    x.select(0, 0).narrow(0, 1037, 1).fill_(nan);  // late in a long row
    x.select(0, 1).narrow(0, 31, 1).fill_(nan);    // a warp's last lane
    x.select(0, 1).narrow(0, 700, 1).fill_(nan);   // a second NaN: the first one's index wins
    x.select(0, 2).narrow(0, 5, 1).fill_(inf);
    x.select(0, 2).narrow(0, 900, 1).fill_(-inf);
    x = x.to(dt);
    Tensor flat = x.reshape({3300});
    for (const Tensor& t : {x, x.transpose(0, 1).contiguous()}) {  // rows, then the column kernel
      const int64_t d = t.size(0) == 3 ? 1 : 0;
      INFO("reduce dim " << d);
      check_matches(amax(on_cuda(t), {d}), amax(t, {d}), 0, 0);
      check_matches(amin(on_cuda(t), {d}), amin(t, {d}), 0, 0);
      check_matches(sum(on_cuda(t), {d}), sum(t, {d}), 1e-5, 1e-4);
      auto [v, i] = min(on_cuda(t), d);
      auto [cv, ci] = min(t, d);
      check_matches(v, cv, 0, 0);
      check_equal<int64_t>(i, ci);
      check_matches(logsumexp(on_cuda(t), {d}), logsumexp(t, {d}), 1e-6, 1e-6);
    }
    CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1037, 31, 5});
    CHECK(std::isnan(sum(x, {1}).to(DType::f64).to_vector<double>()[2]));  // inf + -inf
    CHECK(logsumexp(x, {1}).to(DType::f64).to_vector<double>()[2] == inf);
    check_matches(max(on_cuda(flat)), max(flat), 0, 0);                // one block per row
    check_equal<int64_t>(argmax(on_cuda(flat)), argmax(flat));
  }
}
