// contrastive_loss (losses/contrastive.h): a case computed by hand, PML's formula written out
// naively in double, f64 gradcheck, streamed == unstreamed at several tile sizes, CPU == CUDA
// (the simulator), the batches with nothing to average, d == 0 without NaN, and bad input.
#include <cmath>
#include <vector>

#include "l2_distances.h"

using namespace ember;
using ember::autograd::TensorList;
using test::f64_randn;
using test::labels_of;

namespace {

// PML 2.8.1's ContrastiveLoss written out over every ordered pair in double: relu(d - pos_margin)
// over positive pairs, relu(neg_margin - d) over negative pairs, each averaged over its terms > 0.
double reference_contrastive(const Tensor& emb, const Tensor& labels, ContrastiveOptions o) {
  const auto d = test::l2_distances(emb);
  const int64_t* y = labels.data<int64_t>();
  const int64_t B = labels.size(0);
  double pos = 0, neg = 0, npos = 0, nneg = 0;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      if (i == j) continue;
      const double dij = d[size_t(i)][size_t(j)];
      if (y[i] == y[j] && dij - o.pos_margin > 0) pos += dij - o.pos_margin, npos += 1;
      if (y[i] != y[j] && o.neg_margin - dij > 0) neg += o.neg_margin - dij, nneg += 1;
    }
  return (npos > 0 ? pos / npos : 0) + (nneg > 0 ? neg / nneg : 0);
}

test::LossAndGrad loss_and_grad(const Tensor& emb, const Tensor& labels, ContrastiveOptions o,
                                Device device = Device::cpu()) {
  return test::loss_and_grad(emb, device, [&](const Tensor& x) { return contrastive_loss(x, labels.to(device), o); });
}

}  // namespace

TEST_CASE("contrastive_loss: a case computed by hand", "[losses][contrastive]") {
  // Unit rows a, b (class 0) and c, d (class 1). Positive pairs: |ab| = sqrt(0.8), |cd| = sqrt(2),
  // both > 0. Negative pairs inside neg_margin 1: only |bc| = sqrt(0.4) (|ac| = sqrt(2),
  // |ad| = 2, |bd| = sqrt(3.2)); each pair counts in both orders.
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1, -1, 0}, {4, 2});
  const Tensor loss = contrastive_loss(emb, labels_of({0, 0, 1, 1}));
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx((std::sqrt(0.8) + std::sqrt(2.0)) / 2 + 1 - std::sqrt(0.4)).epsilon(1e-12));
}

TEST_CASE("contrastive_loss: PML's formula on random batches, f32 and f64", "[losses][contrastive]") {
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});
  const Tensor emb = f64_randn({10, 5}, 11);
  for (ContrastiveOptions o : {ContrastiveOptions{}, ContrastiveOptions{.pos_margin = 0.6, .neg_margin = 1.3},
                               ContrastiveOptions{.pos_margin = -0.2, .neg_margin = 0.9}}) {
    INFO("pos_margin " << o.pos_margin << ", neg_margin " << o.neg_margin);
    CHECK(contrastive_loss(emb, y, o).item() == Approx(reference_contrastive(emb, y, o)).epsilon(1e-12));
    CHECK(contrastive_loss(emb.to(DType::f32), y, o).item() ==
          Approx(reference_contrastive(emb, y, o)).epsilon(1e-5));  // f32 distances
  }
}

TEST_CASE("contrastive_loss: f64 gradcheck, default and other margins", "[losses][contrastive][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0});
  for (ContrastiveOptions o : {ContrastiveOptions{}, ContrastiveOptions{.pos_margin = 0.5, .neg_margin = 1.5}}) {
    INFO("pos_margin " << o.pos_margin << ", neg_margin " << o.neg_margin);
    test::require_gradcheck([&](const TensorList& in) { return contrastive_loss(in[0], y, o); },
                            {f64_randn({6, 4}, 3)});
  }
}

TEST_CASE("contrastive_loss: close rows take their distance and gradient from the differences",
          "[losses][contrastive][gradcheck]") {
  // Rows 0 and 1 (and 2 and 3) nearly coincide: d^2 from dot products would have lost digits.
  const Tensor r = f64_randn({6, 4}, 21);
  const Tensor emb = cat({narrow(r, 0, 0, 1), add(narrow(r, 0, 0, 1), 2e-3), narrow(r, 0, 2, 1),
                          add(narrow(r, 0, 2, 1), -1e-3), narrow(r, 0, 4, 2)});
  const Tensor y = labels_of({0, 0, 1, 0, 1, 2});
  const ContrastiveOptions o{.pos_margin = -0.1, .neg_margin = 1.2};
  CHECK(contrastive_loss(emb, y, o).item() == Approx(reference_contrastive(emb, y, o)).epsilon(1e-12));
  test::require_gradcheck([&](const TensorList& in) { return contrastive_loss(in[0], y, o); }, {emb});
}

TEST_CASE("contrastive_loss: streamed tiles equal one whole tile, whatever the tile size", "[losses][contrastive]") {
  test::PairTilesGuard guard;
  const Tensor emb = f64_randn({13, 6}, 5);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 0, 1});
  const ContrastiveOptions o{.pos_margin = 0.2, .neg_margin = 1.1};
  set_pair_tiles({.rows = 13, .cols = 13});
  const test::LossAndGrad whole = loss_and_grad(emb, y, o);
  for (PairTiles tiles : {PairTiles{1, 1}, PairTiles{3, 5}, PairTiles{7, 13}, PairTiles{4, 64}}) {
    INFO("tiles " << tiles.rows << " x " << tiles.cols);
    set_pair_tiles(tiles);
    const test::LossAndGrad streamed = loss_and_grad(emb, y, o);
    test::check_close(streamed.loss, whole.loss, 1e-12, 1e-14);
    test::check_close(streamed.grad, whole.grad, 1e-10, 1e-12);
  }
}

TEST_CASE("contrastive_loss: cuda equals the CPU, f64 and f32", "[losses][contrastive][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  const ContrastiveOptions o{.pos_margin = 0.1, .neg_margin = 1.2};
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const Tensor emb = f64_randn({12, 7}, 9).to(dtype);
    const test::LossAndGrad cpu = loss_and_grad(emb, y, o);
    const test::LossAndGrad gpu = loss_and_grad(emb, y, o, Device::cuda());
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    test::check_close(gpu.loss, cpu.loss, tol, tol);
    test::check_close(gpu.grad, cpu.grad, tol, tol);
  }
  test::require_gradcheck([&](const TensorList& in) { return contrastive_loss(in[0], y.cuda()); },
                          {f64_randn({12, 3}, 4).cuda()});
}

TEST_CASE("contrastive_loss: nothing to average gives 0 and exactly zero gradients", "[losses][contrastive]") {
  const Tensor emb = f64_randn({4, 3}, 2);
  // Unit rows are at most 2 apart: pos_margin 2.5 keeps every positive term at 0, neg_margin 0
  // every negative one.
  const struct {
    const char* what;
    std::vector<int64_t> labels;
    ContrastiveOptions o;
  } cases[] = {{"every pair inside its margin", {0, 1, 0, 1}, {.pos_margin = 2.5, .neg_margin = 0}},
               {"one class, positives inside the margin", {5, 5, 5, 5}, {.pos_margin = 2.5}},
               {"all singletons, negatives inside the margin", {0, 1, 2, 3}, {.neg_margin = 0}}};
  for (const auto& c : cases) {
    INFO(c.what);
    for (Device device : test::test_devices()) {
      const test::LossAndGrad r = loss_and_grad(emb, labels_of(c.labels), c.o, device);
      CHECK(r.loss.item() == 0.0);
      CHECK(max(abs(r.grad)).item() == 0.0);
    }
  }
  // One sample, and an empty batch.
  CHECK(contrastive_loss(f64_randn({1, 3}, 1), labels_of({0})).item() == 0.0);
  CHECK(contrastive_loss(Tensor::empty({0, 3}, {.dtype = DType::f64}), labels_of({})).item() == 0.0);
}

TEST_CASE("contrastive_loss: identical rows have d = 0 and zero gradients, never NaN", "[losses][contrastive]") {
  // Rows 0 and 1 are the same vector, rows 2 and 3 too (up to scale): d = 0 for those pairs,
  // whose hinge is 0 as positives (rows 0, 1) and neg_margin as negatives (rows 2, 3); cdist's
  // gradient at d = 0 is 0.
  const Tensor emb = tensor<double>({1, 2, 2, 1, 2, 4, 3, -1, 3, -1, 6, -2}, {4, 3});
  const Tensor y = labels_of({0, 0, 1, 2});
  for (Device device : test::test_devices()) {
    INFO(device.str());
    const test::LossAndGrad r = loss_and_grad(emb, y, {}, device);
    CHECK(r.loss.item() == Approx(reference_contrastive(emb, y, {})).epsilon(1e-12));
    CHECK(std::isfinite(sum(r.grad).item()));
  }
  // Every row the same and two classes: one negative term (= 1) per pair, zero gradients.
  const Tensor same = tensor<double>({1, 2, 2, 4, 3, 6}, {3, 2});
  for (Device device : test::test_devices()) {
    const test::LossAndGrad r = loss_and_grad(same, labels_of({0, 1, 1}), {}, device);
    CHECK(r.loss.item() == 1.0);
    CHECK(max(abs(r.grad)).item() == 0.0);
  }
}

TEST_CASE("contrastive_loss: bad input is an error that names the problem", "[losses][contrastive]") {
  const Tensor emb = f64_randn({4, 3}, 1);
  CHECK_THAT(test::error_of([&] { contrastive_loss(emb.reshape({12}), labels_of({0, 1, 0, 1})); }),
             Catch::Contains("contrastive_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { contrastive_loss(emb, labels_of({0, 1, 0})); }),
             Catch::Contains("contrastive_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { contrastive_loss(emb, labels_of({0, 1, 0, 1}).to(DType::f32)); }),
             Catch::Contains("contrastive_loss: expected labels of dtype i64, got f32"));
}
