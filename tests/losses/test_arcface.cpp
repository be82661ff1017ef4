// arcface_loss and ArcFaceLoss (losses/arcface.h): a case computed by hand (with a target angle
// beyond pi - m), PML's formula written out naively in double, f64 gradcheck of the embeddings
// and W, streamed == unstreamed at several tile sizes, CPU == CUDA (the simulator), the empty
// batch, bad input, and the Module: PML's init, and weights saved by a PML-layout PyTorch module.
#include <cfloat>
#include <cmath>
#include <vector>

#include "class_loss_support.h"

using namespace ember;
using namespace ember::test;
using ember::autograd::TensorList;

namespace {

constexpr double kPi = 3.14159265358979323846;

// PML 2.8.1's ArcFaceLoss written out naively in double: normalise the embeddings and W's
// columns, replace each target cosine by the margin rule, mean cross-entropy of scale * logits.
double reference_arcface(const Tensor& emb, const Tensor& labels, const Tensor& W, ArcFaceOptions o = {}) {
  const int64_t B = emb.size(0), D = emb.size(1), C = W.size(1);
  const std::vector<double> e = normalized_rows(emb), w = normalized_rows(W.t());
  const int64_t* y = labels.data<int64_t>();
  const double m = o.margin_degrees * kPi / 180;
  double total = 0;
  for (int64_t i = 0; i < B; ++i) {
    std::vector<double> logits(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      double cosine = 0;
      for (int64_t d = 0; d < D; ++d) cosine += e[size_t(i * D + d)] * w[size_t(c * D + d)];
      if (c == y[i]) {
        const double theta = std::acos(std::clamp(cosine, -1.0, 1.0));
        cosine = theta <= kPi - m ? std::cos(theta + m) : std::cos(theta) - m * std::sin(m);
      }
      logits[size_t(c)] = o.scale * cosine;
    }
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double x : logits) sum += std::exp(x - mx);
    total += mx + std::log(sum) - logits[size_t(y[i])];
  }
  return B > 0 ? total / double(B) : 0.0;
}

Tensor arcface_fn(const Tensor& emb, const Tensor& labels, const Tensor& W) { return arcface_loss(emb, labels, W); }

// A batch (B, D) against W (D, C) where row 1's target angle is beyond pi - m: it points away
// from its class's weight column.
struct ArcBatch {
  Tensor emb, W, labels;
};
ArcBatch beyond_batch(uint64_t seed, int64_t B = 9, int64_t D = 5, int64_t C = 4) {
  ArcBatch b{f64_randn({B, D}, seed), f64_randn({D, C}, seed + 1), Tensor()};
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) y.push_back((i * 3 + 1) % C);
  b.labels = labels_of(y);
  // Row 1 := -(its target column) + a little noise.
  Tensor row = b.emb.narrow(0, 1, 1).reshape({D});
  const Tensor column = b.W.narrow(1, y[1], 1).reshape({D});
  row.copy_(add(neg(column), mul(f64_randn({D}, seed + 2), 0.05)));
  return b;
}

double target_angle(const ArcBatch& b, int64_t i) {
  const int64_t D = b.emb.size(1), C = b.W.size(1);
  const std::vector<double> e = normalized_rows(b.emb), w = normalized_rows(b.W.t());
  const int64_t c = b.labels.data<int64_t>()[i];
  double s = 0;
  for (int64_t d = 0; d < D; ++d) s += e[size_t(i * D + d)] * w[size_t(c * D + d)];
  (void)C;
  return std::acos(s);
}

}  // namespace

TEST_CASE("arcface_loss: a case computed by hand, one target angle beyond pi - m", "[losses][arcface]") {
  // Unit class columns w0 = (1, 0), w1 = (0, 1), w2 = (-1, 0); scale 1. Row 0 (class 0) at
  // theta = acos(0.6) gets cos(theta + m); row 1 (class 0) at acos(-0.96) = 163.7 degrees,
  // beyond 180 - 28.6, gets cos(theta) - m sin(m).
  const Tensor W = tensor<double>({1, 0, -1, 0, 1, 0}, {2, 3});
  const Tensor emb = tensor<double>({0.6, 0.8, -0.96, 0.28}, {2, 2});
  const Tensor y = labels_of({0, 0});
  const double m = 28.6 * kPi / 180;
  const double t0 = std::cos(std::acos(0.6) + m);
  const double t1 = -0.96 - m * std::sin(m);
  const double row0 = std::log(std::exp(t0) + std::exp(0.8) + std::exp(-0.6)) - t0;
  const double row1 = std::log(std::exp(t1) + std::exp(0.28) + std::exp(0.96)) - t1;
  const Tensor loss = arcface_loss(emb, y, W, {.scale = 1});
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx((row0 + row1) / 2).epsilon(1e-12));
  // With the default scale 64, against the naive formula.
  CHECK(arcface_loss(emb, y, W).item() == Approx(reference_arcface(emb, y, W)).epsilon(1e-12));
}

TEST_CASE("arcface_loss: PML's formula on random batches, f32 and f64", "[losses][arcface]") {
  const ArcBatch b = beyond_batch(21);
  REQUIRE(target_angle(b, 1) > kPi - 28.6 * kPi / 180);
  for (ArcFaceOptions o : {ArcFaceOptions{}, ArcFaceOptions{.margin_degrees = 10, .scale = 3}}) {
    INFO("margin " << o.margin_degrees << " scale " << o.scale);
    const double expected = reference_arcface(b.emb, b.labels, b.W, o);
    CHECK(arcface_loss(b.emb, b.labels, b.W, o).item() == Approx(expected).epsilon(1e-12));
    CHECK(arcface_loss(b.emb.to(DType::f32), b.labels, b.W.to(DType::f32), o).item() ==
          Approx(expected).epsilon(2e-5));  // f32 cosines, times the scale
  }
}

TEST_CASE("arcface_loss: f64 gradcheck of the embeddings and W", "[losses][arcface][gradcheck]") {
  const ArcBatch b = beyond_batch(5, 6, 4, 3);
  for (ArcFaceOptions o : {ArcFaceOptions{}, ArcFaceOptions{.margin_degrees = 40, .scale = 2}}) {
    INFO("margin " << o.margin_degrees << " scale " << o.scale);
    test::require_gradcheck([&](const TensorList& in) { return arcface_loss(in[0], b.labels, in[1], o); },
                            {b.emb, b.W});
  }
}

TEST_CASE("arcface_loss: tiles and blocks of whole rows equal one whole tile, whatever their size",
          "[losses][arcface]") {
  const ArcBatch b = beyond_batch(7, 13, 6, 11);
  check_tiles_equal_one_tile(arcface_fn, b.emb, b.W, b.labels);
}

TEST_CASE("arcface_loss: rows of 70 and 600 classes, whole or streamed, equal each other and PML's formula",
          "[losses][arcface]") {
  // 600: dB's parts of 300 rows run in three chunks, and dA's blocks of 54 rows in two of 303
  // columns (Note [Gradient GEMMs in chunks]).
  for (const int64_t C : {70, 600}) {
    INFO(C << " classes");
    const ArcBatch b = beyond_batch(23, 40, 8, C);
    check_whole_rows_equal_streamed(arcface_fn, b.emb, b.W, b.labels);
    CHECK(arcface_loss(b.emb, b.labels, b.W).item() ==
          Approx(reference_arcface(b.emb, b.labels, b.W)).epsilon(1e-12));
    // A NaN embedding (its row) and a NaN class weight column (every row's sum).
    for (const bool nan_weight : {true, false}) {
      Tensor e = b.emb.clone(), W = b.W.clone();
      (nan_weight ? W.narrow(1, 5, 1) : e.narrow(0, 3, 1)).fill_(NAN);
      check_whole_rows_equal_streamed(arcface_fn, e, W, b.labels);
    }
  }
}

TEST_CASE("arcface_loss: a frozen input gets no gradient and the other the same bits as with both",
          "[losses][arcface]") {
  const ArcBatch b = beyond_batch(23, 40, 8, 70);
  check_one_gradient_wanted(arcface_fn, b.emb, b.W, b.labels);
  check_one_gradient_wanted(arcface_fn, b.emb.to(DType::f32), b.W.to(DType::f32), b.labels);
}

TEST_CASE("arcface_loss: without a gradient the loss is the same bits and a retained graph repeats its gradients",
          "[losses][arcface]") {
  const ArcBatch b = beyond_batch(7, 13, 6, 11);
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    check_gradient_in_forward(arcface_fn, b.emb.to(dtype), b.W.to(dtype), b.labels);
  }
}

TEST_CASE("arcface_loss: cuda equals the CPU, f64 and f32", "[losses][arcface][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const ArcBatch b = beyond_batch(9, 12, 7, 5);
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const LossAndGrads cpu = class_loss_and_grads(arcface_fn, b.emb.to(dtype), b.W.to(dtype), b.labels);
    const LossAndGrads gpu =
        class_loss_and_grads(arcface_fn, b.emb.to(dtype), b.W.to(dtype), b.labels, Device::cuda());
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    test::check_close(gpu.loss, cpu.loss, tol, tol);
    test::check_close(gpu.demb, cpu.demb, tol, tol);
    test::check_close(gpu.dweights, cpu.dweights, tol, tol);
  }
  const ArcBatch g = beyond_batch(4, 7, 3, 4);
  test::require_gradcheck(
      [&](const TensorList& in) { return arcface_loss(in[0], g.labels.cuda(), in[1], {.scale = 4}); },
      {g.emb.cuda(), g.W.cuda()});
}

TEST_CASE("arcface_loss: an empty batch gives 0 and exactly zero gradients", "[losses][arcface]") {
  for (Device device : test_devices()) {
    INFO(device.str());
    const LossAndGrads r = class_loss_and_grads(arcface_fn, Tensor::empty({0, 3}, {.dtype = DType::f64}),
                                                f64_randn({3, 4}, 1), labels_of({}), device);
    CHECK(r.loss.item() == 0.0);
    CHECK(r.demb.numel() == 0);
    CHECK(max(abs(r.dweights)).item() == 0.0);
  }
}

TEST_CASE("arcface_loss: bad input is an error that names the problem", "[losses][arcface]") {
  const Tensor emb = f64_randn({4, 3}, 1), W = f64_randn({3, 5}, 2);
  const Tensor y = labels_of({0, 1, 4, 1});
  for (Device device : test_devices()) {
    INFO(device.str());
    const Tensor e = emb.to(device), w = W.to(device);
    CHECK_THAT(test::error_of([&] { arcface_loss(e, labels_of({0, 5, 1, 1}).to(device), w); }),
               Catch::Contains("arcface_loss: label 5 is out of range for 5 classes (expected 0 <= label < 5)"));
    CHECK_THAT(test::error_of([&] { arcface_loss(e, labels_of({0, 1, -1, 1}).to(device), w); }),
               Catch::Contains("arcface_loss: label -1 is out of range for 5 classes"));
  }
  CHECK_THAT(test::error_of([&] { arcface_loss(emb, y, f64_randn({4, 5}, 3)); }),
             Catch::Contains("arcface_loss: expected W of shape (D, C) with D = 3 (the embeddings' size), got (4, 5)"));
  CHECK_THAT(test::error_of([&] { arcface_loss(emb.reshape({12}), y, W); }),
             Catch::Contains("arcface_loss: expected embeddings of shape (B, D), got (12,)"));
  CHECK_THAT(test::error_of([&] { arcface_loss(emb, labels_of({0, 1, 0}), W); }),
             Catch::Contains("arcface_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { arcface_loss(emb, y.to(DType::f32), W); }),
             Catch::Contains("arcface_loss: expected labels of dtype i64, got f32"));
  CHECK_THAT(test::error_of([&] { arcface_loss(emb, y, W.to(DType::f32)); }),
             Catch::Contains("arcface_loss: expected W of dtype f64 like the embeddings, got f32"));
  CHECK_THAT(test::error_of([&] { arcface_loss(emb, y, W.reshape({15})); }),
             Catch::Contains("arcface_loss: expected W of shape (D, C), got (15,)"));
  ArcFaceLoss module(5, 3);
  CHECK_THAT(test::error_of([&] { module(f64_randn({2, 4}, 1), labels_of({0, 1})); }),
             Catch::Contains("arcface_loss: expected W of shape (D, C) with D = 4"));
  CHECK_THAT(test::error_of([&] { module.forward(emb); }), Catch::Contains("ArcFaceLoss: a loss needs labels"));
  CHECK_THAT(test::error_of([&] { ArcFaceLoss(0, 3); }),
             Catch::Contains("ArcFaceLoss: expected positive num_classes and embedding_size, got 0 and 3"));
}

TEST_CASE("ArcFaceLoss: parameter W (D, C) drawn from N(0, 1), gradients reach it", "[losses][arcface]") {
  Generator gen(3);
  ArcFaceLoss arcface(100, 64, {}, &gen);
  const auto params = arcface.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "W");
  const Tensor W = arcface.W();
  CHECK(W.shape() == Shape{64, 100});
  CHECK(W.dtype() == DType::f32);
  CHECK(std::fabs(mean(W).item()) < 0.05);
  CHECK(stddev(W).item() == Approx(1.0).epsilon(0.05));
  // The module is the function of its W (cast to the embeddings' dtype, the cast recorded).
  const Tensor emb = f64_randn({6, 64}, 4), y = labels_of({0, 7, 99, 7, 3, 0});
  Tensor loss = arcface(emb, y);
  CHECK(loss.item() == Approx(reference_arcface(emb, y, W.to(DType::f64))).epsilon(1e-5));
  loss.backward();
  REQUIRE(arcface.W().grad().defined());
  CHECK(max(abs(arcface.W().grad())).item() > 0);
}

TEST_CASE("ArcFaceLoss: loads W saved by a PML-layout PyTorch module and gives its loss", "[losses][arcface]") {
  // tests/data/make_pml_class_losses_fixture.py: W (D, C) as PML stores it, trained a few steps;
  // the evaluation batch has a row whose target angle is beyond pi - m.
  const StateDict all = load_tensors(test::data_path("pml_class_losses.safetensors"));
  const Tensor emb = all.at("arcface/embeddings"), y = all.at("arcface/labels");
  const Tensor W = all.at("arcface/state/W");
  ArcFaceLoss arcface(W.size(1), W.size(0));
  arcface.load_state_dict(sub_state_dict(all, "arcface/state/"));
  test::check_close(arcface.W(), W, 0, 0);
  CHECK(arcface(emb, y).item() == Approx(all.at("arcface/loss").item()).epsilon(1e-5));
  CHECK(arcface(emb.to(DType::f64), y).item() == Approx(all.at("arcface/loss_f64").item()).epsilon(1e-12));
  CHECK(reference_arcface(emb, y, W) == Approx(all.at("arcface/loss_f64").item()).epsilon(1e-12));
}
