// proxy_anchor_loss and ProxyAnchorLoss (losses/proxy_anchor.h): a case computed by hand, PML's
// formula written out naively in double, f64 gradcheck of the embeddings and proxies, streamed
// == unstreamed at several tile sizes, CPU == CUDA (the simulator), classes without members or
// without negatives, the empty batch, bad input, and the Module: PML's init, and proxies saved by
// a PML-layout PyTorch module.
#include <cfloat>
#include <cmath>
#include <vector>

#include "class_loss_support.h"

using namespace ember;
using namespace ember::test;
using ember::autograd::TensorList;

namespace {

// PML 2.8.1's ProxyAnchorLoss written out naively in double: per class, log(1 + sum of exp)
// over its members (positives) and over the other rows (negatives); positives divided by the
// classes present, negatives by C.
double reference_proxy_anchor(const Tensor& emb, const Tensor& labels, const Tensor& proxies,
                              ProxyAnchorOptions o = {}) {
  const int64_t B = emb.size(0), D = emb.size(1), C = proxies.size(0);
  const std::vector<double> e = normalized_rows(emb), p = normalized_rows(proxies);
  const int64_t* y = labels.data<int64_t>();
  double pos = 0, neg = 0;
  int64_t present = 0;
  for (int64_t c = 0; c < C; ++c) {
    double pos_sum = 0, neg_sum = 0;
    bool member = false;
    for (int64_t i = 0; i < B; ++i) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += e[size_t(i * D + d)] * p[size_t(c * D + d)];
      if (y[i] == c) {
        pos_sum += std::exp(o.alpha * (o.margin - s));
        member = true;
      } else {
        neg_sum += std::exp(o.alpha * (s + o.margin));
      }
    }
    pos += std::log1p(pos_sum), neg += std::log1p(neg_sum);
    present += member ? 1 : 0;
  }
  return (present > 0 ? pos / double(present) : 0.0) + neg / double(C);
}

Tensor proxy_anchor_fn(const Tensor& emb, const Tensor& labels, const Tensor& proxies) {
  return proxy_anchor_loss(emb, labels, proxies);
}

}  // namespace

TEST_CASE("proxy_anchor_loss: a case computed by hand", "[losses][proxy_anchor]") {
  // Proxies p0 = (1, 0), p1 = (0, 1), p2 = (-1, 0) (class 2 has no member); rows a = (1, 0) and
  // b = (0.6, 0.8) of class 0, c = (0, 1) of class 1; alpha 1, margin 0.1. Two classes present.
  const Tensor proxies = tensor<double>({1, 0, 0, 1, -1, 0}, {3, 2});
  const Tensor emb = tensor<double>({1, 0, 0.6, 0.8, 0, 1}, {3, 2});
  const Tensor y = labels_of({0, 0, 1});
  const double m = 0.1;
  auto P = [&](double s) { return std::exp(m - s); };
  auto N = [&](double s) { return std::exp(s + m); };
  const double pos = std::log(1 + P(1) + P(0.6)) + std::log(1 + P(1)) + 0;
  const double neg = std::log(1 + N(0)) + std::log(1 + N(0) + N(0.8)) + std::log(1 + N(-1) + N(-0.6) + N(0));
  const Tensor loss = proxy_anchor_loss(emb, y, proxies, {.margin = m, .alpha = 1});
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == Approx(pos / 2 + neg / 3).epsilon(1e-12));
  CHECK(proxy_anchor_loss(emb, y, proxies).item() == Approx(reference_proxy_anchor(emb, y, proxies)).epsilon(1e-12));
}

TEST_CASE("proxy_anchor_loss: PML's formula on random batches, f32 and f64", "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({10, 5}, 11), proxies = f64_randn({6, 5}, 12);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2});  // classes 4 and 5 absent
  for (ProxyAnchorOptions o : {ProxyAnchorOptions{}, ProxyAnchorOptions{.margin = 0.3, .alpha = 4}}) {
    INFO("margin " << o.margin << " alpha " << o.alpha);
    const double expected = reference_proxy_anchor(emb, y, proxies, o);
    CHECK(proxy_anchor_loss(emb, y, proxies, o).item() == Approx(expected).epsilon(1e-12));
    CHECK(proxy_anchor_loss(emb.to(DType::f32), y, proxies.to(DType::f32), o).item() ==
          Approx(expected).epsilon(2e-5));
  }
}

TEST_CASE("proxy_anchor_loss: f64 gradcheck of the embeddings and proxies", "[losses][proxy_anchor][gradcheck]") {
  const Tensor y = labels_of({0, 1, 0, 2, 1, 0});
  for (ProxyAnchorOptions o : {ProxyAnchorOptions{}, ProxyAnchorOptions{.margin = 0.2, .alpha = 3}}) {
    INFO("margin " << o.margin << " alpha " << o.alpha);
    test::require_gradcheck([&](const TensorList& in) { return proxy_anchor_loss(in[0], y, in[1], o); },
                            {f64_randn({6, 4}, 3), f64_randn({4, 4}, 4)});
  }
}

TEST_CASE("proxy_anchor_loss: tiles and blocks of whole rows equal one whole tile, whatever their size",
          "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({13, 6}, 5), proxies = f64_randn({11, 6}, 6);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 0, 10});
  check_tiles_equal_one_tile(proxy_anchor_fn, emb, proxies, y);
}

TEST_CASE("proxy_anchor_loss: rows of 70 and 600 embeddings, whole or streamed, equal each other and PML's formula",
          "[losses][proxy_anchor]") {
  // 600: dB's parts of 300 rows run in three chunks, and dA's blocks of 54 rows in two of 303
  // columns (Note [Gradient GEMMs in chunks]).
  for (const int64_t B : {70, 600}) {
    INFO("batch " << B);
    const Tensor emb = f64_randn({B, 8}, 21), proxies = f64_randn({40, 8}, 22);
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < B; ++i) labels.push_back((i * 7) % 37);  // classes 37 to 39 absent
    const Tensor y = labels_of(labels);
    check_whole_rows_equal_streamed(proxy_anchor_fn, emb, proxies, y);
    CHECK(proxy_anchor_loss(emb, y, proxies).item() ==
          Approx(reference_proxy_anchor(emb, y, proxies)).epsilon(1e-12));
    // A NaN proxy (its class's sums and weights) and a NaN embedding (every class's).
    for (const bool nan_proxy : {true, false}) {
      Tensor e = emb.clone(), p = proxies.clone();
      (nan_proxy ? p.narrow(0, 5, 1) : e.narrow(0, 3, 1)).fill_(NAN);
      check_whole_rows_equal_streamed(proxy_anchor_fn, e, p, y);
    }
  }
}

TEST_CASE("proxy_anchor_loss: a frozen input gets no gradient and the other the same bits as with both",
          "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({70, 8}, 21), proxies = f64_randn({40, 8}, 22);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 70; ++i) labels.push_back((i * 7) % 37);
  const Tensor y = labels_of(labels);
  check_one_gradient_wanted(proxy_anchor_fn, emb, proxies, y);
  check_one_gradient_wanted(proxy_anchor_fn, emb.to(DType::f32), proxies.to(DType::f32), y);
}

TEST_CASE("proxy_anchor_loss: without a gradient the loss is the same bits and a retained graph repeats its gradients",
          "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({13, 6}, 5), proxies = f64_randn({11, 6}, 6);
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 0, 10});
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    check_gradient_in_forward(proxy_anchor_fn, emb.to(dtype), proxies.to(dtype), y);
  }
}

TEST_CASE("proxy_anchor_loss: cuda equals the CPU, f64 and f32", "[losses][proxy_anchor][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  const Tensor y = labels_of({0, 1, 2, 0, 1, 2, 0, 3, 1, 2, 0, 0});
  const Tensor emb = f64_randn({12, 7}, 9), proxies = f64_randn({5, 7}, 10);
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(dtype_name(dtype));
    const LossAndGrads cpu = class_loss_and_grads(proxy_anchor_fn, emb.to(dtype), proxies.to(dtype), y);
    const LossAndGrads gpu =
        class_loss_and_grads(proxy_anchor_fn, emb.to(dtype), proxies.to(dtype), y, Device::cuda());
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    test::check_close(gpu.loss, cpu.loss, tol, tol);
    test::check_close(gpu.demb, cpu.demb, tol, tol);
    test::check_close(gpu.dweights, cpu.dweights, tol, tol);
  }
  test::require_gradcheck(
      [&](const TensorList& in) { return proxy_anchor_loss(in[0], y.cuda(), in[1], {.alpha = 4}); },
      {f64_randn({12, 3}, 4).cuda(), f64_randn({5, 3}, 5).cuda()});
}

TEST_CASE("proxy_anchor_loss: one class, no negatives, and an empty batch gives 0 and zero gradients",
          "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({4, 3}, 2), proxies = f64_randn({1, 3}, 3);
  const Tensor y = labels_of({0, 0, 0, 0});
  CHECK(proxy_anchor_loss(emb, y, proxies).item() ==
        Approx(reference_proxy_anchor(emb, y, proxies)).epsilon(1e-12));
  for (Device device : test_devices()) {
    INFO(device.str());
    const LossAndGrads r = class_loss_and_grads(proxy_anchor_fn, Tensor::empty({0, 3}, {.dtype = DType::f64}),
                                                f64_randn({4, 3}, 1), labels_of({}), device);
    CHECK(r.loss.item() == 0.0);
    CHECK(r.demb.numel() == 0);
    CHECK(max(abs(r.dweights)).item() == 0.0);
  }
}

TEST_CASE("proxy_anchor_loss: bad input is an error that names the problem", "[losses][proxy_anchor]") {
  const Tensor emb = f64_randn({4, 3}, 1), proxies = f64_randn({5, 3}, 2);
  const Tensor y = labels_of({0, 1, 4, 1});
  for (Device device : test_devices()) {
    INFO(device.str());
    const Tensor e = emb.to(device), p = proxies.to(device);
    CHECK_THAT(test::error_of([&] { proxy_anchor_loss(e, labels_of({0, 5, 1, 1}).to(device), p); }),
               Catch::Contains("proxy_anchor_loss: label 5 is out of range for 5 classes (expected 0 <= label < 5)"));
    CHECK_THAT(test::error_of([&] { proxy_anchor_loss(e, labels_of({0, 1, -3, 1}).to(device), p); }),
               Catch::Contains("proxy_anchor_loss: label -3 is out of range for 5 classes"));
  }
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb, y, f64_randn({5, 4}, 3)); }),
             Catch::Contains("proxy_anchor_loss: expected proxies of shape (C, D) with D = 3 (the embeddings' size), "
                             "got (5, 4)"));
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb.reshape({2, 2, 3}), y, proxies); }),
             Catch::Contains("proxy_anchor_loss: expected embeddings of shape (B, D), got (2, 2, 3)"));
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb, labels_of({0, 1, 0, 1, 0}), proxies); }),
             Catch::Contains("proxy_anchor_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb, y.reshape({2, 2}), proxies); }),
             Catch::Contains("proxy_anchor_loss: expected labels of shape (4)"));
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb, y.to(DType::f64), proxies); }),
             Catch::Contains("proxy_anchor_loss: expected labels of dtype i64, got f64"));
  CHECK_THAT(test::error_of([&] { proxy_anchor_loss(emb, y, proxies.to(DType::f32)); }),
             Catch::Contains("proxy_anchor_loss: expected proxies of dtype f64 like the embeddings, got f32"));
  ProxyAnchorLoss module(5, 3);
  CHECK_THAT(test::error_of([&] { module(f64_randn({2, 4}, 1), labels_of({0, 1})); }),
             Catch::Contains("proxy_anchor_loss: expected proxies of shape (C, D) with D = 4"));
  CHECK_THAT(test::error_of([&] { module.forward(emb); }), Catch::Contains("ProxyAnchorLoss: a loss needs labels"));
}

TEST_CASE("ProxyAnchorLoss: proxies (C, D), kaiming-normal fan-out, gradients reach them", "[losses][proxy_anchor]") {
  Generator gen(3);
  ProxyAnchorLoss pa(50, 128, {}, &gen);
  const auto params = pa.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "proxies");
  const Tensor P = pa.proxies();
  CHECK(P.shape() == Shape{50, 128});
  CHECK(std::fabs(mean(P).item()) < 0.01);
  CHECK(stddev(P).item() == Approx(std::sqrt(2.0 / 50)).epsilon(0.05));  // gain sqrt(2) / sqrt(fan_out = 50)
  const Tensor emb = f64_randn({6, 128}, 4), y = labels_of({0, 7, 49, 7, 3, 0});
  Tensor loss = pa(emb, y);
  CHECK(loss.item() == Approx(reference_proxy_anchor(emb, y, P.to(DType::f64))).epsilon(1e-5));
  loss.backward();
  REQUIRE(pa.proxies().grad().defined());
  CHECK(max(abs(pa.proxies().grad())).item() > 0);
}

TEST_CASE("ProxyAnchorLoss: loads proxies saved by a PML-layout PyTorch module and gives its loss",
          "[losses][proxy_anchor]") {
  // tests/data/make_pml_class_losses_fixture.py: proxies (C, D) as PML stores them, trained a few steps.
  const StateDict all = load_tensors(test::data_path("pml_class_losses.safetensors"));
  const Tensor emb = all.at("proxy_anchor/embeddings"), y = all.at("proxy_anchor/labels");
  const Tensor P = all.at("proxy_anchor/state/proxies");
  ProxyAnchorLoss pa(P.size(0), P.size(1));
  pa.load_state_dict(sub_state_dict(all, "proxy_anchor/state/"));
  test::check_close(pa.proxies(), P, 0, 0);
  CHECK(pa(emb, y).item() == Approx(all.at("proxy_anchor/loss").item()).epsilon(1e-5));
  CHECK(pa(emb.to(DType::f64), y).item() == Approx(all.at("proxy_anchor/loss_f64").item()).epsilon(1e-12));
  CHECK(reference_proxy_anchor(emb, y, P) == Approx(all.at("proxy_anchor/loss_f64").item()).epsilon(1e-12));
}
