// supcon_loss (losses/supcon.h): a case computed by hand, PML's formula written out naively in
// double, f64 gradcheck, streamed == unstreamed at several tile sizes, CPU == CUDA (the
// simulator), the batches with nothing to average, and bad input.
#include <cfloat>
#include <cmath>
#include <vector>

#include "cuda/runtime.h"
#include "metric_loss_testing.h"

using namespace ember;
using namespace ember::metric_testing;
using ember::autograd::TensorList;

namespace {

// PML 2.8.1's SupConLoss, written out naively over every pair in double: s / t shifted by the
// row's max (diagonal included), log_prob over every j != i, the mean over the positives with
// PML's P_i + small_val, then AvgNonZeroReducer (the mean of the anchor losses > 0).
double reference_supcon(const Tensor& emb, const Tensor& labels, double t, double small) {
  const NormalizedRows n = normalized_rows(emb);
  const int64_t B = n.B;
  const int64_t* y = labels.data<int64_t>();
  bool any_positive = false, any_negative = false;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      any_positive |= i != j && y[i] == y[j];
      any_negative |= y[i] != y[j];
    }
  if (!any_positive || !any_negative) return 0.0;
  double total = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < B; ++i) {
    double row_max = -INFINITY;
    for (int64_t j = 0; j < B; ++j) row_max = std::max(row_max, n.dot(i, j) / t);
    double denominator = 0;
    for (int64_t j = 0; j < B; ++j)
      if (j != i) denominator += std::exp(n.dot(i, j) / t - row_max);
    denominator = std::log(denominator);
    double sum = 0, positives = 0;
    for (int64_t j = 0; j < B; ++j)
      if (j != i && y[j] == y[i]) sum += n.dot(i, j) / t - row_max - denominator, positives += 1;
    const double loss_i = -sum / (positives + small);
    if (loss_i > 0) total += loss_i, ++kept;
  }
  return kept > 0 ? total / double(kept) : 0.0;
}

LossFn supcon(SupConOptions o = {}) {
  return [o](const Tensor& x, const Tensor& y) { return supcon_loss(x, y, o); };
}

}  // namespace

TEST_CASE("supcon_loss: a case computed by hand", "[losses][supcon]") {
  // Unit rows a, b, c (class 0) and d (class 1); temperature 1. Each anchor's denominator holds
  // every other row, its loss is the mean over its positives of -log(exp(s_ij) / Z_i); d has no
  // positive, so its loss is 0 and the mean is over a, b and c.
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1, -1, 0}, {4, 2});
  const Tensor y = labels_of({0, 0, 0, 1});
  const double za = std::log(std::exp(0.6) + std::exp(0.0) + std::exp(-1.0));
  const double zb = std::log(std::exp(0.6) + std::exp(0.8) + std::exp(-0.6));
  const double zc = std::log(std::exp(0.0) + std::exp(0.8) + std::exp(0.0));
  const double a = (2 * za - 0.6 - 0.0) / 2, b = (2 * zb - 0.6 - 0.8) / 2, c = (2 * zc - 0.0 - 0.8) / 2;
  const Tensor loss = supcon_loss(emb, y, {.temperature = 1.0});
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx((a + b + c) / 3).epsilon(1e-12));
}

TEST_CASE("supcon_loss: PML's formula on random batches, f32 and f64", "[losses][supcon]") {
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});
  for (double t : {0.1, 0.5}) {
    const Tensor emb = f64_randn({10, 5}, 11);
    INFO("temperature " << t);
    CHECK(supcon_loss(emb, y, {.temperature = t}).item() == Approx(reference_supcon(emb, y, t, DBL_MIN)).epsilon(1e-12));
    CHECK(supcon_loss(emb.to(DType::f32), y, {.temperature = t}).item() ==
          Approx(reference_supcon(emb, y, t, FLT_MIN)).epsilon(1e-5));  // f32 similarities
  }
}

TEST_CASE("supcon_loss: f64 gradcheck, with and without the default temperature", "[losses][supcon][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0});
  for (double t : {0.1, 1.0}) {
    INFO("temperature " << t);
    test::require_gradcheck([&](const TensorList& in) { return supcon_loss(in[0], y, {.temperature = t}); },
                            {f64_randn({6, 4}, 3)});
  }
}

TEST_CASE("supcon_loss: streamed tiles equal one whole tile, whatever the tile size", "[losses][supcon]") {
  TilesGuard guard;
  const Tensor emb = f64_randn({13, 6}, 5);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 0, 1});
  set_pair_tiles({.rows = 13, .cols = 13});
  const LossAndGrad whole = loss_and_grad(supcon(), emb, y);
  for (PairTiles tiles : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 13}, PairTiles{4, 64}}) {
    INFO("tiles " << tiles.rows << " x " << tiles.cols);
    set_pair_tiles(tiles);
    const LossAndGrad streamed = loss_and_grad(supcon(), emb, y);
    test::check_close(streamed.loss, whole.loss, 1e-12, 1e-14);
    test::check_close(streamed.grad, whole.grad, 1e-10, 1e-12);
  }
}

TEST_CASE("supcon_loss: cuda equals the CPU, f64 and f32", "[losses][supcon][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  check_cuda_matches_cpu(supcon(), y);
  test::require_gradcheck([&](const TensorList& in) { return supcon_loss(in[0], y.cuda(), {.temperature = 0.5}); },
                          {f64_randn({12, 3}, 4).cuda()});
}

TEST_CASE("supcon_loss: nothing to average gives 0 and exactly zero gradients", "[losses][supcon]") {
  const Tensor emb = f64_randn({4, 3}, 2);
  const struct {
    const char* what;
    std::vector<int64_t> labels;
  } cases[] = {{"one class: no negative pair", {5, 5, 5, 5}},
               {"all singletons: no positive pair", {0, 1, 2, 3}}};
  for (const auto& c : cases) {
    INFO(c.what);
    check_zero_loss(supcon(), emb, labels_of(c.labels));
  }
  // One sample, and an empty batch.
  CHECK(supcon_loss(f64_randn({1, 3}, 1), labels_of({0})).item() == 0.0);
  CHECK(supcon_loss(Tensor::empty({0, 3}, {.dtype = DType::f64}), labels_of({})).item() == 0.0);
}

TEST_CASE("supcon_loss: anchors without positives are left out of the mean", "[losses][supcon]") {
  // Rows 3 and 4 are singletons: their loss is 0, and the mean is over rows 0-2 alone.
  const Tensor emb = f64_randn({5, 3}, 8);
  const Tensor y = labels_of({0, 0, 0, 1, 2});
  const double expected = reference_supcon(emb, y, 0.1, DBL_MIN);
  CHECK(supcon_loss(emb, y).item() == Approx(expected).epsilon(1e-12));
  // The same three anchors' losses, averaged over all five rows, would be 3/5 of it.
  CHECK(supcon_loss(emb, y).item() != Approx(expected * 3 / 5).epsilon(1e-6));
  // The singletons' rows still get gradients: they sit in every other anchor's denominator.
  const LossAndGrad r = loss_and_grad(supcon(), emb, y);
  CHECK(max(abs(r.grad.narrow(0, 3, 2))).item() > 0.0);
}

TEST_CASE("supcon_loss: bad input is an error that names the problem", "[losses][supcon]") {
  const Tensor emb = f64_randn({4, 3}, 1);
  CHECK_THAT(test::error_of([&] { supcon_loss(emb.reshape({12}), labels_of({0, 1, 0, 1})); }),
             Catch::Contains("supcon_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { supcon_loss(emb, labels_of({0, 1, 0})); }),
             Catch::Contains("supcon_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { supcon_loss(emb, labels_of({0, 1, 0, 1}).to(DType::f32)); }),
             Catch::Contains("supcon_loss: expected labels of dtype i64, got f32"));
  CHECK_THAT(test::error_of([&] { supcon_loss(emb.to(DType::i64), labels_of({0, 1, 0, 1})); }),
             Catch::Contains("supcon_loss: expected f32 or f64 embeddings, got i64"));
  CHECK_THAT(test::error_of([&] { supcon_loss(emb, labels_of({0, 1, 0, 1}), {.temperature = -1}); }),
             Catch::Contains("supcon_loss: expected temperature > 0, got -1"));
}
