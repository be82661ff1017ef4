// ntxent_loss (losses/ntxent.h): a case computed by hand, PML's formula written out naively in
// double, f64 gradcheck, streamed == unstreamed at several tile sizes, CPU == CUDA (the
// simulator), the batches with nothing to average, and bad input.
#include <cfloat>
#include <cmath>
#include <vector>

#include "cuda/runtime.h"
#include "metric_loss_testing.h"
#include "support/test_support.h"

using namespace ember;
using ember::autograd::TensorList;

namespace {

using metric_testing::f64_randn;
using metric_testing::labels_of;
using metric_testing::LossAndGrad;
using metric_testing::TilesGuard;
using metric_testing::check_cuda_matches_cpu;
using metric_testing::check_zero_loss;

// PML 2.8.1's NTXentLoss, written out naively over every pair in double: normalise, then per
// positive pair (i, j) the max-shifted ratio of exp(s_ij / t) to itself plus the negatives of i.
double reference_ntxent(const Tensor& emb, const Tensor& labels, double t, double small) {
  const metric_testing::NormalizedRows n = metric_testing::normalized_rows(emb);
  const int64_t B = n.B;
  const int64_t* y = labels.data<int64_t>();
  auto sim = [&](int64_t i, int64_t j) { return n.dot(i, j) / t; };
  double total = 0;
  int64_t positives = 0, negatives = 0;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      if (y[i] != y[j]) ++negatives;
      if (i == j || y[i] != y[j]) continue;
      double max_val = sim(i, j);
      for (int64_t k = 0; k < B; ++k)
        if (y[k] != y[i]) max_val = std::max(max_val, sim(i, k));
      const double numerator = std::exp(sim(i, j) - max_val);
      double denominator = numerator;
      for (int64_t k = 0; k < B; ++k)
        if (y[k] != y[i]) denominator += std::exp(sim(i, k) - max_val);
      total += -std::log(numerator / denominator + small);
      ++positives;
    }
  return positives > 0 && negatives > 0 ? total / double(positives) : 0.0;
}

// The loss and the gradient of its embeddings, computed on `device`, returned on the CPU.
LossAndGrad loss_and_grad(const Tensor& emb, const Tensor& labels, NTXentOptions o, Device device = Device::cpu()) {
  return metric_testing::loss_and_grad([o](const Tensor& x, const Tensor& y) { return ntxent_loss(x, y, o); }, emb,
                                       labels, device);
}

}  // namespace

TEST_CASE("ntxent_loss: a case computed by hand", "[losses][ntxent]") {
  // Unit rows a, b (class 0) and c, d (class 1); temperature 1; each term is
  // -log(exp(s_ij) / (exp(s_ij) + sum over i's negatives of exp(s_ik))).
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1, -1, 0}, {4, 2});
  const Tensor y = labels_of({0, 0, 1, 1});
  const double ab = -std::log(std::exp(0.6) / (std::exp(0.6) + std::exp(0.0) + std::exp(-1.0)));
  const double ba = -std::log(std::exp(0.6) / (std::exp(0.6) + std::exp(0.8) + std::exp(-0.6)));
  const double cd = -std::log(1 / (1 + 1 + std::exp(0.8)));
  const double dc = -std::log(1 / (1 + std::exp(-1.0) + std::exp(-0.6)));
  const Tensor loss = ntxent_loss(emb, y, {.temperature = 1.0});
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx((ab + ba + cd + dc) / 4).epsilon(1e-12));
}

TEST_CASE("ntxent_loss: PML's formula on random batches, f32 and f64", "[losses][ntxent]") {
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});
  for (double t : {0.07, 0.5}) {
    const Tensor emb = f64_randn({10, 5}, 11);
    INFO("temperature " << t);
    CHECK(ntxent_loss(emb, y, {.temperature = t}).item() ==
          Approx(reference_ntxent(emb, y, t, DBL_MIN)).epsilon(1e-12));
    CHECK(ntxent_loss(emb.to(DType::f32), y, {.temperature = t}).item() ==
          Approx(reference_ntxent(emb, y, t, FLT_MIN)).epsilon(1e-5));  // f32 similarities
  }
}

TEST_CASE("ntxent_loss: f64 gradcheck, with and without the default temperature", "[losses][ntxent][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0});
  for (double t : {0.07, 1.0}) {
    INFO("temperature " << t);
    test::require_gradcheck([&](const TensorList& in) { return ntxent_loss(in[0], y, {.temperature = t}); },
                            {f64_randn({6, 4}, 3)});
  }
}

TEST_CASE("ntxent_loss: streamed tiles equal one whole tile, whatever the tile size", "[losses][ntxent]") {
  TilesGuard guard;
  const Tensor emb = f64_randn({13, 6}, 5);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 0, 1});
  set_pair_tiles({.rows = 13, .cols = 13});
  const LossAndGrad whole = loss_and_grad(emb, y, {});
  for (PairTiles tiles : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 13}, PairTiles{4, 64}}) {
    INFO("tiles " << tiles.rows << " x " << tiles.cols);
    set_pair_tiles(tiles);
    const LossAndGrad streamed = loss_and_grad(emb, y, {});
    test::check_close(streamed.loss, whole.loss, 1e-12, 1e-14);
    test::check_close(streamed.grad, whole.grad, 1e-10, 1e-12);
  }
}

TEST_CASE("ntxent_loss: cuda equals the CPU, f64 and f32", "[losses][ntxent][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  check_cuda_matches_cpu([](const Tensor& x, const Tensor& y) { return ntxent_loss(x, y); }, y);
  test::require_gradcheck([&](const TensorList& in) { return ntxent_loss(in[0], y.cuda(), {.temperature = 0.5}); },
                          {f64_randn({12, 3}, 4).cuda()});
}

TEST_CASE("ntxent_loss: nothing to average gives 0 and exactly zero gradients", "[losses][ntxent]") {
  const Tensor emb = f64_randn({4, 3}, 2);
  const struct {
    const char* what;
    std::vector<int64_t> labels;
  } cases[] = {{"one class: no negative pair", {5, 5, 5, 5}},
               {"all singletons: no positive pair", {0, 1, 2, 3}}};
  for (const auto& c : cases) {
    INFO(c.what);
    check_zero_loss([](const Tensor& x, const Tensor& y) { return ntxent_loss(x, y); }, emb, labels_of(c.labels));
  }
  // One sample, and an empty batch.
  CHECK(ntxent_loss(f64_randn({1, 3}, 1), labels_of({0})).item() == 0.0);
  CHECK(ntxent_loss(Tensor::empty({0, 3}, {.dtype = DType::f64}), labels_of({})).item() == 0.0);
}

TEST_CASE("ntxent_loss: an anchor without negatives adds zero-loss terms to the mean", "[losses][ntxent]") {
  // Class 0 spans rows 0-2; rows 3 and 4 (class 1) have negatives, so the batch has both kinds.
  const Tensor emb = f64_randn({5, 3}, 8);
  const Tensor y = labels_of({0, 0, 0, 1, 1});
  CHECK(ntxent_loss(emb, y).item() == Approx(reference_ntxent(emb, y, 0.07, DBL_MIN)).epsilon(1e-12));
}

TEST_CASE("ntxent_loss: bad input is an error that names the problem", "[losses][ntxent]") {
  const Tensor emb = f64_randn({4, 3}, 1);
  CHECK_THAT(test::error_of([&] { ntxent_loss(emb.reshape({12}), labels_of({0, 1, 0, 1})); }),
             Catch::Contains("ntxent_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { ntxent_loss(emb, labels_of({0, 1, 0})); }),
             Catch::Contains("ntxent_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { ntxent_loss(emb, labels_of({0, 1, 0, 1}).to(DType::f32)); }),
             Catch::Contains("ntxent_loss: expected labels of dtype i64, got f32"));
  CHECK_THAT(test::error_of([&] { ntxent_loss(emb.to(DType::i64), labels_of({0, 1, 0, 1})); }),
             Catch::Contains("ntxent_loss: expected f32 or f64 embeddings, got i64"));
  CHECK_THAT(test::error_of([&] { ntxent_loss(emb, labels_of({0, 1, 0, 1}), {.temperature = 0}); }),
             Catch::Contains("ntxent_loss: expected temperature > 0, got 0"));
}
