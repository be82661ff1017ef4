// count_nonfinite (ops/kernels.h) and find_nonfinite / describe_nonfinite (ops/nonfinite.h), the
// check behind anomaly mode: the CPU kernel against a plain loop, independent of the thread
// count; the CUDA kernel equal to the CPU's across block and grid-stride boundaries; any layout
// and dtype through find_nonfinite.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "cuda/runtime.h"
#include "ember.h"
#include "ops/kernels.h"
#include "support/test_support.h"

using namespace ember;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// n values, finite except at `planted` (index, value) pairs.
Tensor with_planted(int64_t n, DType dtype, const std::vector<std::pair<int64_t, double>>& planted) {
  Generator gen(5);
  Tensor x = randn({n}, {.dtype = DType::f64}, &gen);
  for (const auto& [i, v] : planted) x.data<double>()[i] = v;
  return x.to(dtype);
}

// The contract, by a plain loop: [NaN count, Inf count, first non-finite index or -1].
std::vector<int64_t> expected_counts(const Tensor& x) {
  const Tensor d = x.to(DType::f64);
  std::vector<int64_t> e{0, 0, -1};
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double v = d.data<double>()[i];
    if (std::isfinite(v)) continue;
    ++e[std::isnan(v) ? 0 : 1];
    if (e[2] < 0) e[2] = i;
  }
  return e;
}

std::vector<int64_t> kernel_counts(const Tensor& x) {
  Tensor out = Tensor::empty({3}, {.dtype = DType::i64, .device = x.device()});
  count_nonfinite_kernel(x.device(), x, out);
  const Tensor host = out.cpu();
  return {host.data<int64_t>()[0], host.data<int64_t>()[1], host.data<int64_t>()[2]};
}

struct Case {
  int64_t n;
  std::vector<std::pair<int64_t, double>> planted;
};

// Sizes below a warp, across the CPU's 65536-element chunks and the CUDA grid-stride loop; the
// first non-finite element early, late, alone, or after later ones of another block.
std::vector<Case> cases() {
  return {{0, {}},
          {1, {{0, NAN}}},
          {31, {}},
          {31, {{30, -kInf}}},
          {1000, {{999, kInf}, {3, NAN}, {500, NAN}}},
          {70000, {{69999, NAN}, {65536, kInf}}},
          {200003, {{200002, kInf}, {131072, -kInf}, {7777, NAN}, {7778, NAN}}}};
}

}  // namespace

TEST_CASE("count_nonfinite on the CPU counts NaN and Inf and finds the first, whatever the thread count",
          "[nonfinite]") {
  for (DType dtype : {DType::f32, DType::f64})
    for (const Case& c : cases()) {
      const Tensor x = with_planted(c.n, dtype, c.planted);
      INFO(dtype_name(dtype) << " n " << c.n);
      const std::vector<int64_t> expected = expected_counts(x);
      CHECK(kernel_counts(x) == expected);
      const int threads = num_threads();
      set_num_threads(1);
      CHECK(kernel_counts(x) == expected);
      set_num_threads(threads);
    }
  // The plain loop itself sees what was planted.
  CHECK(expected_counts(with_planted(1000, DType::f32, cases()[4].planted)) == std::vector<int64_t>{2, 1, 3});
}

TEST_CASE("count_nonfinite on CUDA equals the CPU kernel", "[nonfinite][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  for (DType dtype : {DType::f32, DType::f64})
    for (const Case& c : cases()) {
      const Tensor x = with_planted(c.n, dtype, c.planted);
      INFO(dtype_name(dtype) << " n " << c.n);
      const Tensor xc = c.n == 0 ? Tensor::empty({0}, {.dtype = dtype, .device = Device::cuda()}) : x.to(Device::cuda());
      CHECK(kernel_counts(xc) == kernel_counts(x));
    }
}

TEST_CASE("find_nonfinite takes any layout and dtype, and describe_nonfinite names the first element",
          "[nonfinite]") {
  // A transposed view: the index is the logical row-major one, not the storage offset.
  Tensor base = tensor<float>({1, NAN, 2, 3, 4, 5}, {2, 3});
  Tensor xt = base.transpose(0, 1);  // (3, 2); the NaN, base[0][1], is xt[1][0]: flat index 2
  REQUIRE_FALSE(xt.is_contiguous());
  const NonfiniteCount c = find_nonfinite(xt);
  CHECK(c.nan == 1);
  CHECK(c.inf == 0);
  CHECK(c.first == 2);
  CHECK(describe_nonfinite(xt) == "NaN at element 2 of (3, 2) (1 NaN, 0 Inf among 6 elements)");
  CHECK(describe_nonfinite(tensor<double>({1, -kInf, kInf})) == "-Inf at element 1 of (3,) (0 NaN, 2 Inf among 3 elements)");
  CHECK(describe_nonfinite(tensor<float>({1, 2})).empty());
  // Integers are always finite.
  CHECK_FALSE(find_nonfinite(tensor<int64_t>({1, 2})).any());
  CHECK_FALSE(find_nonfinite(Tensor()).any());
}
