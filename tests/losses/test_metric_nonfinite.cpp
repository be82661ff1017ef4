// Non-finite embeddings in every metric loss (issue #12, Note [Non-finite embeddings] in
// ops/metric_rules.h): with one NaN row, or one inf element, the loss value and which gradient
// elements are NaN follow PyTorch 1.13 + pytorch-metric-learning 2.8.1, on the CPU and on cuda.
//
// What PyTorch + PML give was found by running PML 2.8.1 itself (tests/losses/pml_nonfinite_check.py:
// losses.<Name>Loss() and miners.BatchHardMiner(), default options) on a (8, 5) f64 batch, labels
// {0, 1, 2, 0, 1, 2, 0, 3}, row 2 NaN or element (2, 1) inf; and on the small batches below:
//   contrastive, triplet    value = the loss of the batch without the bad row (its terms are NaN
//                           and AvgNonZeroReducer drops them); every gradient element NaN
//   ... no term left        value NaN (zero_loss = sum(embeddings * 0)); every gradient element 0
//   contrastive, one part   value NaN; every gradient element NaN
//     without terms
//   batch-hard + triplet    every anchor's search meets the NaN row (torch.max picks NaN), so
//                           every mined triplet is NaN and dropped: value NaN, gradient 0
//   NT-Xent, MS, Proxy-     value NaN (MeanReducer, logsumexp); every gradient element NaN
//     Anchor                (ProxyAnchor's proxies too)
//   NT-Xent without a       value NaN (zero_losses), gradient 0
//     positive pair
//   SupCon                  every anchor's log-sum meets the NaN row: all dropped, value NaN,
//                           gradient 0
//   ArcFace                 value NaN; the bad row's gradient NaN, the others finite; W's all NaN
#include <cmath>
#include <vector>

#include "losses/losses.h"
#include "metric_loss_testing.h"

using namespace ember;
using metric_testing::f64_randn;
using metric_testing::labels_of;
using metric_testing::loss_and_grad;
using metric_testing::LossAndGrad;
using metric_testing::test_devices;

namespace {

enum class Bad { nan_row, inf_element };

const char* bad_name(Bad b) { return b == Bad::nan_row ? "a NaN row" : "an inf element"; }

// x (B, D) f64 with row `row` NaN, or its element (row, 1) +inf.
Tensor with_bad_row(const Tensor& x, Bad bad, int64_t row = 2) {
  const Tensor c = x.to(DType::f64).cpu().contiguous();
  std::vector<double> v(c.data<double>(), c.data<double>() + c.numel());
  const int64_t D = c.size(1);
  if (bad == Bad::nan_row)
    for (int64_t d = 0; d < D; ++d) v[size_t(row * D + d)] = NAN;
  else
    v[size_t(row * D + 1)] = INFINITY;
  return tensor<double>(v, {c.size(0), D});
}

// x without row `row`; labels likewise.
Tensor without_row(const Tensor& x, int64_t row = 2) {
  return cat({narrow(x, 0, 0, row), narrow(x, 0, row + 1, x.size(0) - row - 1)});
}

// How many elements of t are NaN, and how many are exactly 0.
struct Census {
  int64_t nan = 0, zero = 0, numel = 0;
};
Census census(const Tensor& t) {
  const Tensor c = t.to(DType::f64).cpu().contiguous();
  Census r{0, 0, c.numel()};
  for (int64_t k = 0; k < c.numel(); ++k) {
    const double v = c.data<double>()[k];
    r.nan += std::isnan(v) ? 1 : 0;
    r.zero += v == 0 ? 1 : 0;
  }
  return r;
}
void check_all_nan(const Tensor& g) {
  const Census c = census(g);
  CHECK(c.nan == c.numel);
}
void check_all_zero(const Tensor& g) {
  const Census c = census(g);
  CHECK(c.zero == c.numel);
}

const Tensor kLabels = labels_of({0, 1, 2, 0, 1, 2, 0, 3});
Tensor base_batch() { return f64_randn({8, 5}, 17); }

// Runs `body(emb, device)` for both bad kinds, f64 and f32, on every test device.
template <class Body>
void for_each_case(const Tensor& clean, Body body) {
  for (Bad bad : {Bad::nan_row, Bad::inf_element})
    for (DType dtype : {DType::f64, DType::f32})
      for (Device device : test_devices()) {
        INFO(bad_name(bad) << ", " << dtype_name(dtype) << ", " << device);
        body(with_bad_row(clean, bad).to(dtype), device);
      }
}

double tolerance(const Tensor& emb) { return emb.dtype() == DType::f64 ? 1e-12 : 1e-5; }

// Unit rows whose every finite term is 0: identical positives (d = 0, pos_margin 0) and
// negatives 2 apart (beyond neg_margin 1 and any triplet margin < 2), then the bad row (label 0).
Tensor no_term_batch(Bad bad) {
  return with_bad_row(tensor<double>({1, 0, 1, 0, -1, 0, -1, 0, 0.6, 0.8}, {5, 2}), bad, 4);
}
const Tensor kNoTermLabels = labels_of({0, 0, 1, 1, 0});

}  // namespace

TEST_CASE("contrastive_loss: non-finite rows drop their terms, the gradient is NaN", "[losses][contrastive][nonfinite]") {
  const Tensor clean = base_batch();
  for_each_case(clean, [&](const Tensor& emb, Device device) {
    const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return contrastive_loss(x, y); }, emb,
                                        kLabels, device);
    const double expected = contrastive_loss(without_row(emb), without_row(kLabels)).item();
    CHECK(r.loss.item() == Approx(expected).epsilon(tolerance(emb)));
    check_all_nan(r.grad);
  });
}

TEST_CASE("contrastive_loss: non-finite rows and no term left: NaN, zero gradient", "[losses][contrastive][nonfinite]") {
  for (Bad bad : {Bad::nan_row, Bad::inf_element})
    for (Device device : test_devices()) {
      INFO(bad_name(bad) << ", " << device);
      const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return contrastive_loss(x, y); },
                                          no_term_batch(bad), kNoTermLabels, device);
      CHECK(std::isnan(r.loss.item()));
      check_all_zero(r.grad);
    }
}

TEST_CASE("contrastive_loss: non-finite rows, one part without terms: NaN, NaN gradient",
          "[losses][contrastive][nonfinite]") {
  // Identical positives (no positive term), negatives 0.6 .. 1.26 apart (negative terms > 0).
  const Tensor e = tensor<double>({1, 0, 1, 0, 0.6, 0.8, 0.6, 0.8, 0, 1}, {5, 2});
  const Tensor finite = narrow(e, 0, 0, 4);
  CHECK(contrastive_loss(finite, narrow(kNoTermLabels, 0, 0, 4)).item() == Approx(1 - std::sqrt(0.8)));
  for (Bad bad : {Bad::nan_row, Bad::inf_element})
    for (Device device : test_devices()) {
      INFO(bad_name(bad) << ", " << device);
      const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return contrastive_loss(x, y); },
                                          with_bad_row(e, bad, 4), kNoTermLabels, device);
      CHECK(std::isnan(r.loss.item()));
      check_all_nan(r.grad);
    }
}

TEST_CASE("triplet_margin_loss: non-finite rows drop their triplets, the gradient is NaN",
          "[losses][triplet][nonfinite]") {
  const Tensor clean = base_batch();
  for_each_case(clean, [&](const Tensor& emb, Device device) {
    const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return triplet_margin_loss(x, y); },
                                        emb, kLabels, device);
    const double expected = triplet_margin_loss(without_row(emb), without_row(kLabels)).item();
    CHECK(r.loss.item() == Approx(expected).epsilon(tolerance(emb)));
    check_all_nan(r.grad);
  });
  // Many positives per anchor: the CPU's sorted path (Note [Few positives]) meets the NaN too.
  const Tensor big = f64_randn({40, 4}, 5);
  std::vector<int64_t> y(40);
  for (int64_t i = 0; i < 40; ++i) y[size_t(i)] = i % 2;
  const Tensor labels = labels_of(y);
  for (Device device : test_devices()) {
    INFO("B 40, " << device);
    const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& l) { return triplet_margin_loss(x, l); },
                                        with_bad_row(big, Bad::nan_row), labels, device);
    CHECK(r.loss.item() == Approx(triplet_margin_loss(without_row(big), without_row(labels)).item()).epsilon(1e-12));
    check_all_nan(r.grad);
  }
}

TEST_CASE("triplet_margin_loss: non-finite rows and no triplet left: NaN, zero gradient",
          "[losses][triplet][nonfinite]") {
  for (Bad bad : {Bad::nan_row, Bad::inf_element})
    for (Device device : test_devices()) {
      INFO(bad_name(bad) << ", " << device);
      const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return triplet_margin_loss(x, y); },
                                          no_term_batch(bad), kNoTermLabels, device);
      CHECK(std::isnan(r.loss.item()));
      check_all_zero(r.grad);
    }
}

TEST_CASE("batch_hard_miner: NaN distances win, as with torch.max, and the mined loss is NaN with zero gradient",
          "[losses][triplet][nonfinite]") {
  const Tensor clean = base_batch();
  for_each_case(clean, [&](const Tensor& emb, Device device) {
    const Tensor x = emb.to(device);
    const Triplets t = batch_hard_miner(x, kLabels.to(device));
    // Row 2 (label 2) is a positive or a negative of every other anchor, so it is picked there
    // (a NaN distance wins); row 2 itself takes its one positive, row 5, and the smallest index
    // among its all-NaN negatives, 0; the other choices are the finite batch's. (PML on its own
    // batch of this shape: a = 0..6, p = {3, 4, 5, 0, 1, 2, 0}, n = {2, 2, 0, 2, 2, 4, 2}.)
    const Triplets finite = batch_hard_miner(clean, kLabels);
    const int64_t* y = kLabels.data<int64_t>();
    const Tensor a = t.anchor.cpu(), p = t.positive.cpu(), n = t.negative.cpu();
    REQUIRE(a.numel() == 7);
    REQUIRE(finite.anchor.numel() == 7);
    for (int64_t k = 0; k < 7; ++k) {
      INFO("anchor " << k);
      const int64_t want_p = k == 2 ? 5 : (y[k] == 2 ? 2 : finite.positive.data<int64_t>()[k]);
      const int64_t want_n = k == 2 ? 0 : (y[k] != 2 ? 2 : finite.negative.data<int64_t>()[k]);
      CHECK(a.data<int64_t>()[k] == k);
      CHECK(p.data<int64_t>()[k] == want_p);
      CHECK(n.data<int64_t>()[k] == want_n);
    }
    const LossAndGrad r = loss_and_grad(
        [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y, batch_hard_miner(e, y)); }, emb,
        kLabels, device);
    CHECK(std::isnan(r.loss.item()));
    check_all_zero(r.grad);
  });
}

TEST_CASE("ntxent_loss: non-finite rows: NaN, NaN gradient, and zero_loss without positives",
          "[losses][ntxent][nonfinite]") {
  for_each_case(base_batch(), [&](const Tensor& emb, Device device) {
    const LossAndGrad r =
        loss_and_grad([](const Tensor& x, const Tensor& y) { return ntxent_loss(x, y); }, emb, kLabels, device);
    CHECK(std::isnan(r.loss.item()));
    check_all_nan(r.grad);
    // No positive pair: PML's zero_losses, sum(embeddings * 0): NaN, gradient 0.
    const LossAndGrad z = loss_and_grad([](const Tensor& x, const Tensor& y) { return ntxent_loss(x, y); },
                                        narrow(emb, 0, 0, 4), labels_of({0, 1, 2, 3}), device);
    CHECK(std::isnan(z.loss.item()));
    check_all_zero(z.grad);
  });
}

TEST_CASE("supcon_loss: non-finite rows: every anchor dropped, NaN, zero gradient", "[losses][supcon][nonfinite]") {
  for_each_case(base_batch(), [&](const Tensor& emb, Device device) {
    const LossAndGrad r =
        loss_and_grad([](const Tensor& x, const Tensor& y) { return supcon_loss(x, y); }, emb, kLabels, device);
    CHECK(std::isnan(r.loss.item()));
    check_all_zero(r.grad);
  });
}

TEST_CASE("multi_similarity_loss: non-finite rows: NaN, NaN gradient", "[losses][multi_similarity][nonfinite]") {
  for_each_case(base_batch(), [&](const Tensor& emb, Device device) {
    const LossAndGrad r = loss_and_grad([](const Tensor& x, const Tensor& y) { return multi_similarity_loss(x, y); },
                                        emb, kLabels, device);
    CHECK(std::isnan(r.loss.item()));
    check_all_nan(r.grad);
  });
}

namespace {

// The loss, the embeddings' gradient and the class weights' gradient on `device`.
struct ClassLossResult {
  Tensor loss, grad, weight_grad;
};
template <class Fn>
ClassLossResult class_loss(Fn fn, const Tensor& emb, const Tensor& weights, Device device) {
  Tensor x = emb.to(device).detach().requires_grad_();
  Tensor w = weights.to(device).detach().requires_grad_();
  Tensor loss = fn(x, kLabels.to(device), w);
  loss.backward();
  return {loss.cpu(), x.grad().cpu(), w.grad().cpu()};
}

}  // namespace

TEST_CASE("arcface_loss: non-finite rows: NaN, the bad row's gradient NaN, W's all NaN", "[losses][arcface][nonfinite]") {
  const Tensor W = f64_randn({5, 4}, 23);  // (D, C), as PML stores it
  for_each_case(base_batch(), [&](const Tensor& emb, Device device) {
    const ClassLossResult r = class_loss(
        [](const Tensor& x, const Tensor& y, const Tensor& w) { return arcface_loss(x, y, w); }, emb,
        W.to(emb.dtype()), device);
    CHECK(std::isnan(r.loss.item()));
    check_all_nan(narrow(r.grad, 0, 2, 1));
    const Census others = census(cat({narrow(r.grad, 0, 0, 2), narrow(r.grad, 0, 3, 5)}));
    CHECK(others.nan == 0);
    CHECK(others.zero < others.numel);
    check_all_nan(r.weight_grad);
  });
}

TEST_CASE("proxy_anchor_loss: non-finite rows: NaN, NaN gradients", "[losses][proxy_anchor][nonfinite]") {
  const Tensor proxies = f64_randn({4, 5}, 29);  // (C, D)
  for_each_case(base_batch(), [&](const Tensor& emb, Device device) {
    const ClassLossResult r = class_loss(
        [](const Tensor& x, const Tensor& y, const Tensor& p) { return proxy_anchor_loss(x, y, p); }, emb,
        proxies.to(emb.dtype()), device);
    CHECK(std::isnan(r.loss.item()));
    check_all_nan(r.grad);
    check_all_nan(r.weight_grad);
  });
}
