// multi_similarity_loss (losses/multi_similarity.h): a case computed by hand, PML's formula
// written out naively in double, f64 gradcheck, streamed == unstreamed at several tile sizes,
// CPU == CUDA (the simulator), rows without positives or negatives, the empty batches, and bad
// input.
#include <cmath>
#include <vector>

#include "cuda/runtime.h"
#include "metric_loss_testing.h"

using namespace ember;
using namespace ember::metric_testing;
using ember::autograd::TensorList;

namespace {

// PML 2.8.1's MultiSimilarityLoss, written out naively over every pair in double: per row, the
// logsumexp with add_one of alpha * margin(s, base) over its positives and of beta *
// margin(base, s) over its negatives (a part with an empty mask is 0), then the mean over rows.
double reference_ms(const Tensor& emb, const Tensor& labels, MultiSimilarityOptions o) {
  const NormalizedRows n = normalized_rows(emb);
  const int64_t B = n.B;
  if (B <= 1) return 0.0;  // GenericPairLoss: no pair at all
  const int64_t* y = labels.data<int64_t>();
  auto log_one_plus = [&](int64_t i, bool positives, double scale, double sign) {
    std::vector<double> xs = {0.0};
    for (int64_t j = 0; j < B; ++j)
      if (j != i && (y[j] == y[i]) == positives) xs.push_back(scale * sign * (n.dot(i, j) - o.base));
    if (xs.size() == 1) return 0.0;
    const double m = *std::max_element(xs.begin(), xs.end());
    double sum = 0;
    for (double x : xs) sum += std::exp(x - m);
    return m + std::log(sum);
  };
  double total = 0;
  for (int64_t i = 0; i < B; ++i)
    total += log_one_plus(i, true, o.alpha, -1) / o.alpha + log_one_plus(i, false, o.beta, 1) / o.beta;
  return total / double(B);
}

LossFn ms(MultiSimilarityOptions o = {}) {
  return [o](const Tensor& x, const Tensor& y) { return multi_similarity_loss(x, y, o); };
}

const MultiSimilarityOptions kSoft{.alpha = 1, .beta = 10, .base = 0.3};

}  // namespace

TEST_CASE("multi_similarity_loss: a case computed by hand", "[losses][multi_similarity]") {
  // Unit rows a, b (class 0) and c, d (class 1); alpha 2, beta 10, base 0.5. Similarities:
  // ab 0.6, ac 0, ad -1, bc 0.8, bd -0.6, cd 0.
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1, -1, 0}, {4, 2});
  const Tensor y = labels_of({0, 0, 1, 1});
  auto pos = [](double s) { return std::log(1 + std::exp(2 * (0.5 - s))) / 2; };
  auto neg = [](double s1, double s2) {
    return std::log(1 + std::exp(10 * (s1 - 0.5)) + std::exp(10 * (s2 - 0.5))) / 10;
  };
  const double a = pos(0.6) + neg(0.0, -1.0), b = pos(0.6) + neg(0.8, -0.6);
  const double c = pos(0.0) + neg(0.0, 0.8), d = pos(0.0) + neg(-1.0, -0.6);
  const Tensor loss = multi_similarity_loss(emb, y, {.alpha = 2, .beta = 10, .base = 0.5});
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx((a + b + c + d) / 4).epsilon(1e-12));
}

TEST_CASE("multi_similarity_loss: PML's formula on random batches, f32 and f64", "[losses][multi_similarity]") {
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});
  const Tensor emb = f64_randn({10, 5}, 11);
  for (MultiSimilarityOptions o : {MultiSimilarityOptions{}, kSoft}) {
    INFO("alpha " << o.alpha << " beta " << o.beta << " base " << o.base);
    CHECK(multi_similarity_loss(emb, y, o).item() == Approx(reference_ms(emb, y, o)).epsilon(1e-12));
    CHECK(multi_similarity_loss(emb.to(DType::f32), y, o).item() ==
          Approx(reference_ms(emb, y, o)).epsilon(1e-5));  // f32 similarities
  }
}

TEST_CASE("multi_similarity_loss: f64 gradcheck, default and softer parameters",
          "[losses][multi_similarity][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0});
  for (MultiSimilarityOptions o : {MultiSimilarityOptions{}, kSoft}) {
    INFO("alpha " << o.alpha << " beta " << o.beta << " base " << o.base);
    test::require_gradcheck([&](const TensorList& in) { return multi_similarity_loss(in[0], y, o); },
                            {f64_randn({6, 4}, 3)});
  }
}

TEST_CASE("multi_similarity_loss: streamed tiles equal one whole tile, whatever the tile size",
          "[losses][multi_similarity]") {
  TilesGuard guard;
  const Tensor emb = f64_randn({13, 6}, 5);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 0, 1});
  set_pair_tiles({.rows = 13, .cols = 13});
  const LossAndGrad whole = loss_and_grad(ms(kSoft), emb, y);
  for (PairTiles tiles : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 13}, PairTiles{4, 64}}) {
    INFO("tiles " << tiles.rows << " x " << tiles.cols);
    set_pair_tiles(tiles);
    const LossAndGrad streamed = loss_and_grad(ms(kSoft), emb, y);
    test::check_close(streamed.loss, whole.loss, 1e-12, 1e-14);
    test::check_close(streamed.grad, whole.grad, 1e-10, 1e-12);
  }
}

TEST_CASE("multi_similarity_loss: cuda equals the CPU, f64 and f32", "[losses][multi_similarity][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const Tensor emb = f64_randn({12, 7}, 9).to(dtype);
    for (MultiSimilarityOptions o : {MultiSimilarityOptions{}, kSoft}) {
      const LossAndGrad cpu = loss_and_grad(ms(o), emb, y);
      const LossAndGrad gpu = loss_and_grad(ms(o), emb, y, Device::cuda());
      const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
      test::check_close(gpu.loss, cpu.loss, tol, tol);
      test::check_close(gpu.grad, cpu.grad, tol, tol);
    }
  }
  test::require_gradcheck([&](const TensorList& in) { return multi_similarity_loss(in[0], y.cuda(), kSoft); },
                          {f64_randn({12, 3}, 4).cuda()});
}

TEST_CASE("multi_similarity_loss: rows without positives or without negatives keep the other part",
          "[losses][multi_similarity]") {
  const Tensor emb = f64_randn({4, 3}, 2);
  const struct {
    const char* what;
    std::vector<int64_t> labels;
  } cases[] = {{"one class: positive parts only", {5, 5, 5, 5}},
               {"all singletons: negative parts only", {0, 1, 2, 3}},
               {"a singleton beside a class", {0, 0, 0, 1}}};
  for (const auto& c : cases) {
    INFO(c.what);
    const Tensor y = labels_of(c.labels);
    const double expected = reference_ms(emb, y, kSoft);
    CHECK(expected > 0);
    std::vector<Device> devices = {Device::cpu()};
    if (cuda::is_available()) devices.push_back(Device::cuda());
    for (Device device : devices) {
      const LossAndGrad r = loss_and_grad(ms(kSoft), emb, y, device);
      CHECK(r.loss.item() == Approx(expected).epsilon(1e-12));
      CHECK(max(abs(r.grad)).item() > 0.0);
    }
    test::require_gradcheck([&](const TensorList& in) { return multi_similarity_loss(in[0], y, kSoft); }, {emb});
  }
}

TEST_CASE("multi_similarity_loss: one sample or none gives 0 and exactly zero gradients",
          "[losses][multi_similarity]") {
  std::vector<Device> devices = {Device::cpu()};
  if (cuda::is_available()) devices.push_back(Device::cuda());
  for (Device device : devices) {
    const LossAndGrad one = loss_and_grad(ms(), f64_randn({1, 3}, 1), labels_of({0}), device);
    CHECK(one.loss.item() == 0.0);
    CHECK(max(abs(one.grad)).item() == 0.0);
    const LossAndGrad none = loss_and_grad(ms(), Tensor::empty({0, 3}, {.dtype = DType::f64}), labels_of({}), device);
    CHECK(none.loss.item() == 0.0);
    CHECK(none.grad.numel() == 0);
  }
}

TEST_CASE("multi_similarity_loss: bad input is an error that names the problem", "[losses][multi_similarity]") {
  const Tensor emb = f64_randn({4, 3}, 1);
  const Tensor y = labels_of({0, 1, 0, 1});
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb.reshape({12}), y); }),
             Catch::Contains("multi_similarity_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb, labels_of({0, 1, 0})); }),
             Catch::Contains("multi_similarity_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb, y.to(DType::f32)); }),
             Catch::Contains("multi_similarity_loss: expected labels of dtype i64, got f32"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb.to(DType::i64), y); }),
             Catch::Contains("multi_similarity_loss: expected f32 or f64 embeddings, got i64"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb, y, {.alpha = 0}); }),
             Catch::Contains("multi_similarity_loss: expected a finite alpha > 0, got 0"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb, y, {.beta = -50}); }),
             Catch::Contains("multi_similarity_loss: expected a finite beta > 0, got -50"));
  CHECK_THAT(test::error_of([&] { multi_similarity_loss(emb, y, {.base = INFINITY}); }),
             Catch::Contains("multi_similarity_loss: expected a finite base, got inf"));
}
