// Retrieval metrics (apps/train/retrieval_metrics.h) on hand-computed rankings: P@1, R-Precision
// and MAP@R as PML's AccuracyCalculator defines them, ties, lone queries, and tiling invariance.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "apps/train/retrieval_metrics.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace ember;
using namespace ember::apps;

namespace {

Tensor rows(const std::vector<std::vector<float>>& values) {
  const int64_t n = int64_t(values.size()), d = int64_t(values[0].size());
  Tensor t = Tensor::empty({n, d});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) t.data<float>()[i * d + k] = values[size_t(i)][size_t(k)];
  return t;
}

Tensor labels(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({int64_t(values.size())}, {.dtype = DType::i64});
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// Unit vectors at the given angles (degrees): cosine similarity falls with the angle between them.
Tensor at_angles(const std::vector<double>& degrees) {
  std::vector<std::vector<float>> v;
  for (double a : degrees) v.push_back({float(std::cos(a * M_PI / 180)), float(std::sin(a * M_PI / 180))});
  return rows(v);
}

}  // namespace

TEST_CASE("retrieval metrics: MAP@R and R-Precision on a known ranking") {
  // The query at 0 degrees (label 0); its neighbours in order of angle have labels
  // 0, 1, 0, 0, 1, 0: R = 4 other samples of label 0. Hits at positions 1, 3, 4 within R:
  // MAP@R = (1/1 + 2/3 + 3/4) / 4, R-Precision = 3/4, P@1 = 1. The hit at position 6 is past R.
  const Tensor e = at_angles({0, 10, 20, 30, 40, 50, 60});
  const Tensor y = labels({0, 0, 1, 0, 0, 1, 0});
  const auto scores = retrieval_scores(e, y);
  CHECK(scores[0].r == 4);
  CHECK_FALSE(scores[0].lone);
  CHECK(scores[0].precision_at_1 == 1.0);
  CHECK(scores[0].r_precision == Approx(0.75).epsilon(1e-12));
  CHECK(scores[0].map_at_r == Approx((1.0 + 2.0 / 3 + 3.0 / 4) / 4).epsilon(1e-12));
  // The query at 20 degrees (label 1, R = 1): nearest are 10 and 30 degrees (equal angles, but
  // not bitwise-equal similarities), both label 0, so everything is 0.
  CHECK(scores[2].r == 1);
  CHECK(scores[2].precision_at_1 == 0.0);
  CHECK(scores[2].map_at_r == 0.0);
}

TEST_CASE("retrieval metrics: the averages over a small set, computed by hand") {
  // Angles 0, 10, 30, 90 with labels A, B, A, B; every R is 1, so all three metrics are the
  // fraction of queries whose nearest neighbour shares their label:
  //   q0 (A): nearest 10 (B).  q1 (B): 0 (A).  q2 (A): 10 (B).  q3 (B): 30 (A)  -> 0 / 4.
  const Tensor y = labels({0, 1, 0, 1});
  const RetrievalMetrics far = retrieval_metrics(at_angles({0, 10, 30, 90}), y);
  CHECK(far.queries == 4);
  CHECK(far.precision_at_1 == 0.0);
  CHECK(far.map_at_r == 0.0);
  const RetrievalMetrics near = retrieval_metrics(at_angles({0, 10, 30, 15}), y);
  // With q3 moved to 15 degrees:
  //   q0: 10 (B) first -> 0.  q1: 15 (B, 5 deg) -> 1.  q2: 15 (B, 15 deg) before 0 (A) -> 0.
  //   q3: 10 (B, 5 deg) -> 1.  P@1 = R-Prec = MAP@R = 2/4.
  CHECK(near.precision_at_1 == 0.5);
  CHECK(near.r_precision == 0.5);
  CHECK(near.map_at_r == 0.5);
}

TEST_CASE("retrieval metrics: equal similarities rank by reference index (Note [Ties])") {
  // References 1 and 2 are the same vector; the query's nearest is whichever comes first.
  const Tensor e = rows({{1, 0}, {0.6f, 0.8f}, {0.6f, 0.8f}, {-1, 0}});
  const auto first_wrong = retrieval_scores(e, labels({0, 1, 0, 1}));
  CHECK(first_wrong[0].precision_at_1 == 0.0);  // reference 1 (label 1) wins the tie
  CHECK(first_wrong[0].map_at_r == 0.0);
  const auto first_right = retrieval_scores(e, labels({0, 0, 1, 1}));
  CHECK(first_right[0].precision_at_1 == 1.0);
  CHECK(first_right[0].map_at_r == 1.0);
  // The same with one-reference tiles: the tie is resolved across tiles the same way.
  CHECK(retrieval_scores(e, labels({0, 1, 0, 1}), {.query_block = 1, .reference_tile = 1})[0].precision_at_1 == 0.0);
}

TEST_CASE("retrieval metrics: a class with one member (R = 0) is left out of every average, as PML does") {
  // Label 2 has one member: its query is lone. It still serves as a reference to the others.
  const Tensor e = at_angles({0, 5, 90, 2});
  const Tensor y = labels({0, 0, 1, 2});  // labels 1 and 2 are both lone
  const auto scores = retrieval_scores(e, y);
  CHECK(scores[2].lone);
  CHECK(scores[3].lone);
  CHECK(scores[3].r == 0);
  // q0 (R=1): nearest is 2 deg (label 2, a lone reference) -> P@1 0. q1: nearest 2 deg too -> 0.
  const RetrievalMetrics m = average_scores(scores);
  CHECK(m.queries == 2);
  CHECK(m.lone_queries == 2);
  CHECK(m.precision_at_1 == 0.0);
  CHECK(m.r_precision == 0.0);
  // Every query lone: NaN, as PML's nan_accuracy.
  const RetrievalMetrics none = retrieval_metrics(at_angles({0, 10}), labels({0, 1}));
  CHECK(none.queries == 0);
  CHECK(std::isnan(none.precision_at_1));
  CHECK(std::isnan(none.map_at_r));
}

TEST_CASE("retrieval metrics: tiles and blocks of any size give bitwise the same scores as a full sort") {
  Generator gen(5);
  const int64_t n = 203, d = 8;
  const Tensor e = randn({n, d}, {}, &gen);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = (i * 7) % 6;
  const Tensor yt = labels(y);
  const auto big = retrieval_scores(e, yt, {.query_block = 64, .reference_tile = 4096});
  const auto small = retrieval_scores(e, yt, {.query_block = 3, .reference_tile = 5});
  // The reference: every similarity in double, a full sort, the definitions in the header.
  const std::vector<float> v = e.to_vector<float>();
  std::vector<double> norm(n, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) norm[size_t(i)] += double(v[size_t(i * d + k)]) * v[size_t(i * d + k)];
  double map_sum = 0;
  for (int64_t q = 0; q < n; ++q) {
    REQUIRE(big[size_t(q)].map_at_r == small[size_t(q)].map_at_r);
    REQUIRE(big[size_t(q)].precision_at_1 == small[size_t(q)].precision_at_1);
    std::vector<std::pair<double, int64_t>> ranked;
    for (int64_t t = 0; t < n; ++t) {
      if (t == q) continue;
      double dot = 0;
      for (int64_t k = 0; k < d; ++k) dot += double(v[size_t(q * d + k)]) * v[size_t(t * d + k)];
      ranked.push_back({-dot / std::sqrt(norm[size_t(q)] * norm[size_t(t)]), t});
    }
    std::sort(ranked.begin(), ranked.end());
    const int64_t r = std::count(y.begin(), y.end(), y[size_t(q)]) - 1;
    int64_t hits = 0;
    double sum = 0;
    for (int64_t i = 0; i < r; ++i)
      if (y[size_t(ranked[size_t(i)].second)] == y[size_t(q)]) sum += double(++hits) / double(i + 1);
    CHECK(big[size_t(q)].precision_at_1 == (y[size_t(ranked[0].second)] == y[size_t(q)] ? 1.0 : 0.0));
    CHECK(big[size_t(q)].map_at_r == Approx(sum / double(r)).epsilon(1e-12));
    map_sum += sum / double(r);
  }
  CHECK(retrieval_metrics(e, yt).map_at_r == Approx(map_sum / double(n)).epsilon(1e-12));
}

TEST_CASE("retrieval metrics: bad inputs are errors that say what was expected") {
  CHECK_THROWS_WITH(retrieval_metrics(zeros({4}), labels({0, 0, 1, 1})), Catch::Contains("must be (N, D)"));
  CHECK_THROWS_WITH(retrieval_metrics(zeros({4, 2}), labels({0, 0, 1})), Catch::Contains("4 embeddings but 3 labels"));
  CHECK_THROWS_WITH(retrieval_metrics(zeros({2, 2}), zeros({2})), Catch::Contains("labels must be (N) i64"));
}

