// triplet_margin_loss (losses/triplet.h) over every triplet and over given triplets, and
// batch_hard_miner (losses/batch_hard_miner.h): a case computed by hand, PML's formulas written
// out naively in double (every triplet listed), f64 gradcheck, streamed == unstreamed at several
// tile sizes, CPU == CUDA (the simulator), the batches with nothing to average (every triplet
// satisfied, one class), d == 0 without NaN, the miner against a naive search, and bad input.
#include <cmath>
#include <vector>

#include "l2_distances.h"

using namespace ember;
using ember::autograd::TensorList;
using test::f64_randn;
using test::labels_of;

namespace {

// PML's TripletMarginLoss over the listed triplets (a[t], p[t], n[t]): relu(d_ap - d_an + margin),
// averaged over the terms > 0.
double reference_over(const std::vector<std::vector<double>>& d, const std::vector<int64_t>& a,
                      const std::vector<int64_t>& p, const std::vector<int64_t>& n, double margin) {
  double total = 0, count = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    const double v = d[size_t(a[t])][size_t(p[t])] - d[size_t(a[t])][size_t(n[t])] + margin;
    if (v > 0) total += v, count += 1;
  }
  return count > 0 ? total / count : 0;
}

// PML's all-triplets: every (a, p, n), p != a of a's label, n of another, listed.
double reference_all(const Tensor& emb, const Tensor& labels, double margin) {
  const auto d = test::l2_distances(emb);
  const int64_t* y = labels.data<int64_t>();
  std::vector<int64_t> a, p, n;
  for (int64_t i = 0; i < labels.size(0); ++i)
    for (int64_t j = 0; j < labels.size(0); ++j)
      for (int64_t k = 0; k < labels.size(0); ++k)
        if (j != i && y[j] == y[i] && y[k] != y[i]) a.push_back(i), p.push_back(j), n.push_back(k);
  return reference_over(d, a, p, n, margin);
}

std::vector<int64_t> values_of(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

Triplets triplets_of(std::vector<int64_t> a, std::vector<int64_t> p, std::vector<int64_t> n) {
  return {labels_of(a), labels_of(p), labels_of(n)};
}

Triplets triplets_to(const Triplets& t, Device device) {
  return {t.anchor.to(device), t.positive.to(device), t.negative.to(device)};
}

test::LossAndGrad all_loss_and_grad(const Tensor& emb, const Tensor& labels, TripletOptions o,
                                    Device device = Device::cpu()) {
  return test::loss_and_grad(emb, device,
                             [&](const Tensor& x) { return triplet_margin_loss(x, labels.to(device), o); });
}

test::LossAndGrad mined_loss_and_grad(const Tensor& emb, const Tensor& labels, const Triplets& t, TripletOptions o,
                                      Device device = Device::cpu()) {
  return test::loss_and_grad(emb, device, [&](const Tensor& x) {
    return triplet_margin_loss(x, labels.to(device), triplets_to(t, device), o);
  });
}

// Every-triplet loss and gradient against the given-triplets path fed every triplet listed (it
// computes each triplet's distances on its own), at each margin; the loss must be > 0.
void check_every_triplet_equals_listed(const std::vector<int64_t>& labels, const Tensor& emb,
                                       std::initializer_list<double> margins) {
  const int64_t B = int64_t(labels.size());
  std::vector<int64_t> a, p, n;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j)
      for (int64_t k = 0; k < B; ++k)
        if (j != i && labels[size_t(j)] == labels[size_t(i)] && labels[size_t(k)] != labels[size_t(i)])
          a.push_back(i), p.push_back(j), n.push_back(k);
  const Tensor y = labels_of(labels);
  const Triplets listed = triplets_of(a, p, n);
  for (double margin : margins) {
    INFO("margin " << margin);
    const auto all = all_loss_and_grad(emb, y, {.margin = margin});
    const auto given = mined_loss_and_grad(emb, y, listed, {.margin = margin});
    CHECK(all.loss.item() > 0);
    test::check_close(all.loss, given.loss, 1e-12, 1e-14);
    test::check_close(all.grad, given.grad, 1e-10, 1e-12);
  }
}

}  // namespace

TEST_CASE("triplet_margin_loss: a case computed by hand", "[losses][triplet]") {
  // Unit rows a, p (class 0) and n (class 1). Anchor a: |ap| = sqrt(0.8) < |an| = sqrt(2) - 0.05,
  // satisfied. Anchor p: |pa| - |pn| + 0.05 = sqrt(0.8) - sqrt(0.4) + 0.05 > 0. n has no positive.
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1}, {3, 2});
  const Tensor loss = triplet_margin_loss(emb, labels_of({0, 0, 1}));
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx(std::sqrt(0.8) - std::sqrt(0.4) + 0.05).epsilon(1e-12));
}

TEST_CASE("triplet_margin_loss: PML's formula on random batches, f32 and f64", "[losses][triplet]") {
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 1});
  const Tensor emb = f64_randn({12, 5}, 11);
  for (double margin : {0.05, 0.3, 1.0}) {
    INFO("margin " << margin);
    CHECK(triplet_margin_loss(emb, y, {.margin = margin}).item() ==
          Approx(reference_all(emb, y, margin)).epsilon(1e-12));
    CHECK(triplet_margin_loss(emb.to(DType::f32), y, {.margin = margin}).item() ==
          Approx(reference_all(emb, y, margin)).epsilon(1e-5));  // f32 distances
  }
}

TEST_CASE("triplet_margin_loss: f64 gradcheck over every triplet", "[losses][triplet][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0, 2});
  for (double margin : {0.05, 0.5}) {
    INFO("margin " << margin);
    test::require_gradcheck([&](const TensorList& in) { return triplet_margin_loss(in[0], y, {.margin = margin}); },
                            {f64_randn({7, 4}, 3)});
  }
}

TEST_CASE("triplet_margin_loss: streamed tiles equal one whole tile, whatever the tile size", "[losses][triplet]") {
  test::PairTilesGuard guard;
  const Tensor emb = f64_randn({13, 6}, 5);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 0, 1});
  const TripletOptions o{.margin = 0.4};
  set_pair_tiles({.rows = 13, .cols = 13});
  const test::LossAndGrad whole = all_loss_and_grad(emb, y, o);
  for (PairTiles tiles : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 13}, PairTiles{4, 64}}) {
    INFO("tiles " << tiles.rows << " x " << tiles.cols);
    set_pair_tiles(tiles);
    const test::LossAndGrad streamed = all_loss_and_grad(emb, y, o);
    test::check_close(streamed.loss, whole.loss, 1e-12, 1e-14);
    test::check_close(streamed.grad, whole.grad, 1e-10, 1e-12);
  }
}

TEST_CASE("triplet_margin_loss: anchors with many positives (the sorted path) equal their listed triplets",
          "[losses][triplet]") {
  // 258 rows of class 0 give their anchors 257 positives, above Note [Few positives]'s 256, so
  // they take the sorted path; the 6 rows of class 1 take the scans. The listed triplets go
  // through the given-triplets path, which computes each triplet's distances on its own.
  std::vector<int64_t> labels(264, 0);
  for (size_t i = 258; i < labels.size(); ++i) labels[i] = 1;
  check_every_triplet_equals_listed(labels, f64_randn({264, 4}, 29), {0.05, 0.5});
}

TEST_CASE("triplet_margin_loss: both sides of the tiled path's bound equal their listed triplets",
          "[losses][triplet]") {
  // A class of 65 rows gives its rows 64 positives, the most the tiled path takes
  // (kMaxTiledPositives in ops/cpu/triplet_tiled.h); 66 rows send the batch through whole rows.
  // Classes of 4 and 3 rows beside them: rows with other numbers of positives in one batch.
  for (int64_t big : {65, 66}) {
    INFO("a class of " << big << " rows");
    std::vector<int64_t> labels(size_t(big), 0);
    for (int k = 0; k < 4; ++k) labels.push_back(1);
    for (int k = 0; k < 3; ++k) labels.push_back(2);
    check_every_triplet_equals_listed(labels, f64_randn({int64_t(labels.size()), 3}, 31), {0.05, 0.6});
  }
}

TEST_CASE("triplet_margin_loss: without a gradient the loss is the same bits, and a retained graph repeats its "
          "gradient", "[losses][triplet]") {
  // The forward computes the terms' gradient only when one will be wanted (Note [Gradient in the
  // forward] in ops/cpu/triplet_tiled.cpp); its backward scales it and must leave it for a second
  // backward of a retained graph.
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 1, 3});
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    const Tensor emb = f64_randn({13, 6}, 17).to(dtype);
    Tensor x = emb.detach().requires_grad_();
    const Tensor with_grad = triplet_margin_loss(x, y, {.margin = 0.3});
    Tensor without;
    {
      autograd::NoGradGuard no_grad;
      without = triplet_margin_loss(x, y, {.margin = 0.3});
    }
    CHECK(without.item() == with_grad.item());
    const Tensor tripled = mul(with_grad, 3.0);  // an upstream gradient of 3: a G scaled in place would show
    tripled.backward({}, /*retain_graph=*/true);
    const Tensor first = x.grad().clone();
    tripled.backward();
    test::check_close(x.grad(), mul(first, 2.0), 0, 0);
  }
}

TEST_CASE("triplet_margin_loss: given triplets, PML's formula and f64 gradcheck", "[losses][triplet][gradcheck]") {
  const Tensor emb = f64_randn({6, 4}, 7);
  const Tensor y = labels_of({0, 0, 1, 1, 2, 0});
  // Repeats, an anchor that is its own positive (d = 0), a triplet whose labels do not make a
  // triplet: PML uses the given indices as they are.
  const std::vector<int64_t> a = {0, 0, 2, 5, 1, 3, 4, 0}, p = {1, 5, 3, 0, 1, 2, 4, 1}, n = {2, 4, 0, 3, 2, 4, 0, 2};
  const Triplets t = triplets_of(a, p, n);
  for (double margin : {0.05, 0.8}) {
    INFO("margin " << margin);
    CHECK(triplet_margin_loss(emb, y, t, {.margin = margin}).item() ==
          Approx(reference_over(test::l2_distances(emb), a, p, n, margin)).epsilon(1e-12));
    test::require_gradcheck(
        [&](const TensorList& in) { return triplet_margin_loss(in[0], y, t, {.margin = margin}); }, {emb});
  }
}

TEST_CASE("triplet_margin_loss: cuda equals the CPU, f64 and f32, every and given triplets",
          "[losses][triplet][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  test::PairTilesGuard guard;
  set_pair_tiles({.rows = 5, .cols = 64});  // the cuda backward sweeps anchors in chunks of 5
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  const Triplets t = triplets_of({0, 3, 1, 6, 2, 11}, {3, 0, 4, 10, 5, 0}, {1, 7, 0, 2, 0, 9});
  const TripletOptions o{.margin = 0.3};
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const Tensor emb = f64_randn({12, 7}, 9).to(dtype);
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    const test::LossAndGrad cpu = all_loss_and_grad(emb, y, o);
    const test::LossAndGrad gpu = all_loss_and_grad(emb, y, o, Device::cuda());
    test::check_close(gpu.loss, cpu.loss, tol, tol);
    test::check_close(gpu.grad, cpu.grad, tol, tol);
    const test::LossAndGrad mined_cpu = mined_loss_and_grad(emb, y, t, o);
    const test::LossAndGrad mined_gpu = mined_loss_and_grad(emb, y, t, o, Device::cuda());
    test::check_close(mined_gpu.loss, mined_cpu.loss, tol, tol);
    test::check_close(mined_gpu.grad, mined_cpu.grad, tol, tol);
  }
  test::require_gradcheck([&](const TensorList& in) { return triplet_margin_loss(in[0], y.cuda(), o); },
                          {f64_randn({12, 3}, 4).cuda()});
  test::require_gradcheck(
      [&](const TensorList& in) { return triplet_margin_loss(in[0], y.cuda(), triplets_to(t, Device::cuda()), o); },
      {f64_randn({12, 3}, 4).cuda()});
}

TEST_CASE("triplet_margin_loss: nothing to average gives 0 and exactly zero gradients", "[losses][triplet]") {
  // Every triplet satisfied: class 0 around +x, class 1 around -x (d_ap < 0.2, d_an > 1.8).
  const Tensor separated = tensor<double>({1, 0.05, 0, 1, -0.05, 0.02, 1, 0, -0.06, -1, 0.04, 0, -1, 0, 0.05}, {5, 3});
  const Tensor y = labels_of({0, 0, 0, 1, 1});
  const Tensor emb = f64_randn({4, 3}, 2);
  const struct {
    const char* what;
    Tensor emb;
    std::vector<int64_t> labels;
  } cases[] = {{"every triplet satisfied", separated, {0, 0, 0, 1, 1}},
               {"one class: no negative", emb, {5, 5, 5, 5}},
               {"all singletons: no positive", emb, {0, 1, 2, 3}}};
  for (const auto& c : cases) {
    INFO(c.what);
    for (Device device : test::test_devices()) {
      INFO(device.str());
      const test::LossAndGrad r = all_loss_and_grad(c.emb, labels_of(c.labels), {}, device);
      CHECK(r.loss.item() == 0.0);
      CHECK(max(abs(r.grad)).item() == 0.0);
    }
  }
  // Batch-hard on the separated batch: its hardest triplets are satisfied too.
  for (Device device : test::test_devices()) {
    const test::LossAndGrad r = test::loss_and_grad(separated, device, [&](const Tensor& x) {
      return triplet_margin_loss(x, y.to(device), batch_hard_miner(x, y.to(device)));
    });
    CHECK(r.loss.item() == 0.0);
    CHECK(max(abs(r.grad)).item() == 0.0);
  }
  // No triplets given, one sample, an empty batch.
  const Triplets none = triplets_of({}, {}, {});
  for (Device device : test::test_devices()) {
    const test::LossAndGrad r = mined_loss_and_grad(emb, labels_of({0, 0, 1, 1}), none, {}, device);
    CHECK(r.loss.item() == 0.0);
    CHECK(max(abs(r.grad)).item() == 0.0);
  }
  CHECK(triplet_margin_loss(f64_randn({1, 3}, 1), labels_of({0})).item() == 0.0);
  CHECK(triplet_margin_loss(Tensor::empty({0, 3}, {.dtype = DType::f64}), labels_of({})).item() == 0.0);
}

TEST_CASE("triplet_margin_loss: identical rows have d = 0 and zero gradients there, never NaN", "[losses][triplet]") {
  // Rows 0 and 1 are one direction (an anchor and its positive at d = 0), row 2 is row 3 scaled
  // (a negative at d = 0 from its own class's view, across classes here).
  const Tensor emb = tensor<double>({1, 2, 2, 2, 4, 4, 3, -1, 0, 6, -2, 0, 0, 1, -1}, {5, 3});
  const Tensor y = labels_of({0, 0, 1, 2, 1});
  for (Device device : test::test_devices()) {
    INFO(device.str());
    const test::LossAndGrad r = all_loss_and_grad(emb, y, {.margin = 0.5}, device);
    CHECK(r.loss.item() == Approx(reference_all(emb, y, 0.5)).epsilon(1e-12));
    CHECK(std::isfinite(sum(r.grad).item()));
  }
}

TEST_CASE("batch_hard_miner: the hardest positive and negative of each anchor", "[losses][triplet][miner]") {
  const Tensor emb = f64_randn({10, 4}, 13);
  // Row 7 is a singleton (no positive) and is dropped.
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});
  const auto d = test::l2_distances(emb);
  std::vector<int64_t> a, p, n;
  for (int64_t i = 0; i < 10; ++i) {
    int64_t hp = -1, hn = -1;
    for (int64_t j = 0; j < 10; ++j) {
      const int64_t yi = values_of(y)[size_t(i)], yj = values_of(y)[size_t(j)];
      if (yj == yi && j != i && (hp < 0 || d[size_t(i)][size_t(j)] > d[size_t(i)][size_t(hp)])) hp = j;
      if (yj != yi && (hn < 0 || d[size_t(i)][size_t(j)] < d[size_t(i)][size_t(hn)])) hn = j;
    }
    if (hp >= 0 && hn >= 0) a.push_back(i), p.push_back(hp), n.push_back(hn);
  }
  CHECK(a.size() == 9);
  for (Device device : test::test_devices())
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(device.str() << " " << dtype_name(dtype));
      const Tensor x = emb.to(dtype).to(device).detach().requires_grad_();
      const Triplets t = batch_hard_miner(x, y.to(device));
      CHECK(t.anchor.device() == device);
      CHECK(values_of(t.anchor) == a);
      CHECK(values_of(t.positive) == p);
      CHECK(values_of(t.negative) == n);
      CHECK_FALSE(t.anchor.requires_grad());
    }
  // Ties go to the smaller index: rows 1, 2 and 3 are all the same direction.
  const Tensor tied = tensor<double>({1, 0, 0, 1, 0, 2, 0, 3, 1, 1}, {5, 2});
  for (Device device : test::test_devices()) {
    const Triplets t = batch_hard_miner(tied.to(device), labels_of({0, 1, 1, 1, 0}).to(device));
    CHECK(values_of(t.anchor) == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(values_of(t.positive) == std::vector<int64_t>{4, 2, 1, 1, 0});
    CHECK(values_of(t.negative) == std::vector<int64_t>{1, 4, 4, 4, 1});
  }
  // One class or all singletons: nothing to mine.
  CHECK(batch_hard_miner(emb, labels_of(std::vector<int64_t>(10, 4))).anchor.numel() == 0);
  CHECK(batch_hard_miner(f64_randn({3, 2}, 1), labels_of({0, 1, 2})).anchor.numel() == 0);
}

TEST_CASE("batch_hard_miner + triplet_margin_loss: gradcheck with the mined triplets held fixed",
          "[losses][triplet][miner][gradcheck]") {
  const Tensor emb = f64_randn({9, 4}, 17);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2});
  for (Device device : test::test_devices()) {
    INFO(device.str());
    const Tensor x = emb.to(device);
    const Tensor yd = y.to(device);
    const Triplets t = batch_hard_miner(x, yd);
    CHECK(t.anchor.numel() == 9);
    // The composition's gradient is the fixed triplets' gradient: mining adds none.
    const test::LossAndGrad composed = test::loss_and_grad(x, device, [&](const Tensor& v) {
      return triplet_margin_loss(v, yd, batch_hard_miner(v, yd), {.margin = 0.5});
    });
    const test::LossAndGrad fixed = mined_loss_and_grad(emb, y, triplets_to(t, Device::cpu()), {.margin = 0.5}, device);
    test::check_close(composed.loss, fixed.loss, 0, 0);
    test::check_close(composed.grad, fixed.grad, 0, 0);
    test::require_gradcheck([&](const TensorList& in) { return triplet_margin_loss(in[0], yd, t, {.margin = 0.5}); },
                            {x});
  }
}

TEST_CASE("triplet_margin_loss: bad input is an error that names the problem", "[losses][triplet]") {
  const Tensor emb = f64_randn({4, 3}, 1);
  const Tensor y = labels_of({0, 1, 0, 1});
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb.reshape({12}), y); }),
             Catch::Contains("triplet_margin_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, labels_of({0, 1, 0})); }),
             Catch::Contains("triplet_margin_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { batch_hard_miner(emb, y.to(DType::f32)); }),
             Catch::Contains("batch_hard_miner: expected labels of dtype i64, got f32"));
  const Tensor ids = labels_of({0, 2});
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, {ids.to(DType::f32), ids, labels_of({1, 3})}); }),
             Catch::Contains("triplet_margin_loss: expected anchor indices of dtype i64, got f32"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, {ids, ids.reshape({1, 2}), labels_of({1, 3})}); }),
             Catch::Contains("triplet_margin_loss: expected positive indices of shape (T), got (1, 2)"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, {ids, ids, labels_of({1})}); }),
             Catch::Contains("expected anchor, positive and negative indices of one length, got 2, 2 and 1"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, {ids, labels_of({2, 4}), labels_of({1, 3})}); }),
             Catch::Contains("triplet_margin_loss: expected positive indices in [0, 4), got 4 at position 1"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, {ids, ids, labels_of({-1, 3})}); }),
             Catch::Contains("triplet_margin_loss: expected negative indices in [0, 4), got -1 at position 0"));
  CHECK_THAT(test::error_of([&] { triplet_margin_loss(emb, y, Triplets{}); }),
             Catch::Contains("triplet_margin_loss: expected anchor indices, got an undefined tensor"));
}
