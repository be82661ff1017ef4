// dropout: the mask is Philox's (element i <- word i % 4 of block first + i / 4), scaled by
// 1 / (1 - p), reproducible from a seed, reused by the backward; eval / p = 0 / p = 1 cases.
// The op table (tests/ops/test_op_table.cpp) has its values against the mask recomputed in
// make_fixtures.py, its gradcheck with a fixed generator and the cuda comparison.
#include "support/test_support.h"

using namespace ember;
using ember::test::check_close;

namespace {

// The expected kept/dropped pattern straight from the generator.
std::vector<bool> philox_keep(uint64_t seed, uint64_t first_block, int64_t n, double p) {
  Generator g(seed);
  std::vector<bool> keep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    keep[size_t(i)] = uniform_float(g.block(first_block + uint64_t(i / 4))[size_t(i % 4)]) >= float(p);
  return keep;
}

}  // namespace

TEST_CASE("dropout's mask is the Philox layout and survivors are scaled by 1 / (1 - p)") {
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator g(7);
    g.reserve(3);  // start at a non-zero block offset
    const int64_t n = 1001;
    Tensor y = dropout(ones({n}, {.dtype = dtype}), 0.3, true, &g);
    REQUIRE(g.offset() == 3 + (n + 3) / 4);
    const std::vector<bool> keep = philox_keep(7, 3, n, 0.3);
    const std::vector<double> v = y.to(DType::f64).to_vector<double>();
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      REQUIRE(v[size_t(i)] == Approx(keep[size_t(i)] ? 1 / 0.7 : 0.0).epsilon(1e-6));
      kept += keep[size_t(i)];
    }
    REQUIRE(kept > 600);
    REQUIRE(kept < 800);
  }
}

TEST_CASE("dropout keeps about 1 - p of a large tensor and is reproducible") {
  Generator a(11), b(11);
  Tensor x = ones({100000});
  Tensor ya = dropout(x, 0.25, true, &a), yb = dropout(x, 0.25, true, &b);
  check_close(ya, yb, 0, 0);
  const double kept = sum(ne(ya, 0.0).to(DType::f64)).item() / 100000.0;
  REQUIRE(kept == Approx(0.75).margin(0.01));
  Tensor next = dropout(x, 0.25, true, &a);  // the generator moved on: another mask
  REQUIRE(sum(ne(ya, next).to(DType::f64)).item() > 1000);
}

TEST_CASE("dropout's backward regenerates the forward's mask") {
  Generator g(3);
  Tensor x = add(rand({7, 9}, {.dtype = DType::f64}), 1.0).requires_grad_();  // no zeros
  Tensor y = dropout(x, 0.5, true, &g);
  Tensor up = rand({7, 9}, {.dtype = DType::f64});
  sum(mul(y, up)).backward();
  // d y / d x = mask * 2 = y / x elementwise.
  check_close(x.grad(), mul(up, div(y.detach(), x.detach())), 1e-14, 1e-14);
}

TEST_CASE("dropout on a non-contiguous input uses row-major element order") {
  Tensor base = add(rand({6, 4}, {.dtype = DType::f64}), 1.0);
  Generator a(9), b(9);
  check_close(dropout(base.t(), 0.5, true, &a), dropout(base.t().contiguous(), 0.5, true, &b), 0, 0);
}

TEST_CASE("dropout in eval, p = 0 and p = 1") {
  Tensor x = rand({4, 5}).requires_grad_();
  REQUIRE(dropout(x, 0.5, false).shares_storage(x));
  REQUIRE(dropout(x, 0.0, true).shares_storage(x));
  Tensor z = dropout(x, 1.0, true);
  check_close(z, zeros({4, 5}), 0, 0);
  sum(z).backward();
  check_close(x.grad(), zeros({4, 5}), 0, 0);
}

TEST_CASE("dropout rejects bad probabilities and dtypes") {
  REQUIRE_THROWS_WITH(dropout(ones({3}), -0.1, true), Catch::Contains("0 <= p <= 1") && Catch::Contains("-0.1"));
  REQUIRE_THROWS_WITH(dropout(ones({3}), 1.5, true), Catch::Contains("1.5"));
  REQUIRE_THROWS_WITH(dropout(ones({3}, {.dtype = DType::i64}), 0.5, true), Catch::Contains("floating"));
}
