#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>

#include "autograd/graph.h"
#include "core/error.h"
#include "nn/checkpoint.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/sgd.h"
#include "ops/ops.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

namespace {

const StateDict& fixtures() {
  static const StateDict f = load_tensors(std::string(EMBER_TEST_DATA_DIR) + "/optim_fixtures.safetensors");
  return f;
}

using Factory = std::function<std::unique_ptr<Optimizer>(Tensor&, Tensor&)>;

// The configurations of tests/data/make_optim_fixtures.py, in the same order.
std::vector<std::pair<std::string, Factory>> configs() {
  return {
      {"sgd", [](Tensor& a, Tensor& b) { return std::make_unique<SGD>(std::vector{a, b}, SgdOptions{.lr = 0.1}); }},
      {"sgd_momentum",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<SGD>(std::vector{a, b},
                                      SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"sgd_nesterov",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<SGD>(std::vector{a, b},
                                      SgdOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
       }},
      {"sgd_groups",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<SGD>(std::vector<ParamGroup<SgdOptions>>{
             {{a}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}}, {{b}, {.lr = 0.2, .momentum = 0.9}}});
       }},
      {"adam", [](Tensor& a, Tensor& b) { return std::make_unique<Adam>(std::vector{a, b}, AdamOptions{.lr = 0.01}); }},
      {"adam_wd_amsgrad",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<Adam>(std::vector{a, b}, AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99,
                                                                      .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"adamw",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<AdamW>(std::vector{a, b}, AdamOptions{.lr = 0.01, .weight_decay = 0.05});
       }},
      {"adamw_amsgrad",
       [](Tensor& a, Tensor& b) {
         return std::make_unique<AdamW>(std::vector{a, b}, AdamOptions{.lr = 0.02, .beta1 = 0.85, .beta2 = 0.995,
                                                                       .weight_decay = 0.1, .amsgrad = true});
       }},
  };
}

Tensor param(const std::string& name) { return fixtures().at(name).clone().requires_grad_(); }

void set_grads(Tensor& p0, Tensor& p1, int k) {
  p0.set_grad(fixtures().at("grad." + std::to_string(k) + ".p0").clone());
  p1.set_grad(fixtures().at("grad." + std::to_string(k) + ".p1").clone());
}

void check_matches(const Tensor& got, const std::string& key) {
  INFO(key);
  // float32 rounding only: torch evaluates the same expressions op by op.
  test::check_close(got, fixtures().at(key), 2e-6, 1e-7);
}

}  // namespace

TEST_CASE("optim: SGD, Adam and AdamW match torch.optim step by step") {
  for (const auto& [name, make] : configs()) {
    SECTION(name) {
      Tensor p0 = param("init.p0"), p1 = param("init.p1");
      auto opt = make(p0, p1);
      for (int k = 1; k <= 3; ++k) {
        set_grads(p0, p1, k);
        opt->step();
        INFO(name << " step " << k);
        check_matches(p0, name + "." + std::to_string(k) + ".p0");
        check_matches(p1, name + "." + std::to_string(k) + ".p1");
      }
    }
  }
}

TEST_CASE("optim: state_dict after one step lets a fresh optimizer continue identically") {
  for (const auto& [name, make] : configs()) {
    SECTION(name) {
      Tensor a0 = param("init.p0"), a1 = param("init.p1");
      auto uninterrupted = make(a0, a1);
      set_grads(a0, a1, 1);
      uninterrupted->step();
      const StateDict saved = uninterrupted->state_dict();
      // A copy of the parameters, a fresh optimizer, the saved state.
      Tensor b0 = a0.detach().clone().requires_grad_(), b1 = a1.detach().clone().requires_grad_();
      auto resumed = make(b0, b1);
      resumed->load_state_dict(saved);
      for (int k = 2; k <= 3; ++k) {
        set_grads(a0, a1, k);
        set_grads(b0, b1, k);
        uninterrupted->step();
        resumed->step();
      }
      CHECK(a0.to_vector<float>() == b0.to_vector<float>());
      CHECK(a1.to_vector<float>() == b1.to_vector<float>());
    }
  }
}

TEST_CASE("optim: state_dict layout and malformed state errors") {
  Tensor p0 = param("init.p0"), p1 = param("init.p1");
  Adam opt({p0, p1}, {.lr = 0.01, .amsgrad = true});
  set_grads(p0, p1, 1);
  opt.step();
  const StateDict sd = opt.state_dict();
  CHECK(sd.at("state.0.step").item() == 1);
  CHECK(sd.at("state.1.exp_avg").shape() == Shape{4});
  CHECK(sd.count("state.1.max_exp_avg_sq") == 1);
  CHECK(sd.at("param_groups.0.lr").item() == 0.01);

  Tensor q0 = param("init.p0"), q1 = param("init.p1");
  Adam other({q0, q1}, {.lr = 0.01, .amsgrad = true});
  StateDict bad = sd;
  bad["state.0.exp_avg"] = zeros({4, 3});
  bad["state.7.exp_avg"] = zeros({1});
  bad.erase("param_groups.0.lr");
  try {
    other.load_state_dict(bad);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Contains("missing 'param_groups.0.lr'"));
    CHECK_THAT(msg, Contains("'state.0.exp_avg' has shape (4, 3), parameter 0 has (3, 4)"));
    CHECK_THAT(msg, Contains("unexpected 'state.7.exp_avg'"));
  }
  Adam one_param({q0}, {});
  CHECK_THROWS_WITH(one_param.load_state_dict(sd), Contains("group 0 has 2 parameters in the state but 1 here"));
}

TEST_CASE("optim: zero_grad, skipped parameters, option checks") {
  Tensor a = ones({2}, {.requires_grad = true}), b = ones({2}, {.requires_grad = true});
  SGD opt({a, b}, {.lr = 0.5});
  a.set_grad(full({2}, 2.0));
  opt.step();  // b has no gradient: untouched
  CHECK(a.to_vector<float>() == std::vector<float>{0, 0});
  CHECK(b.to_vector<float>() == std::vector<float>{1, 1});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_THROWS_WITH(SGD({a}, {.lr = 0.1, .nesterov = true}), Contains("nesterov needs momentum > 0"));
  CHECK_THROWS_WITH(Adam({a}, {.beta1 = 1.0}), Contains("betas must be in [0, 1)"));
  CHECK_THROWS_WITH(SGD({a}, {.lr = -1}), Contains("lr must be >= 0, got -1"));
}

TEST_CASE("optim: split_weight_decay separates matrices from vectors") {
  Tensor w = ones({3, 2}, {.requires_grad = true}), bias = ones({3}, {.requires_grad = true});
  struct Tiny : Module {
    Tiny(Tensor w, Tensor b) : Module("Tiny") {
      register_parameter("w", w);
      register_parameter("b", b);
    }
    Tensor forward(const Tensor& x) override { return x; }
  } tiny(w, bias);
  auto [decay, no_decay] = split_weight_decay(tiny);
  REQUIRE(decay.size() == 1);
  REQUIRE(no_decay.size() == 1);
  CHECK(decay[0].shape() == Shape{3, 2});
  CHECK(no_decay[0].shape() == Shape{3});
}

TEST_CASE("optim: clip_grad_norm_ scales by the total norm like torch") {
  Tensor a = zeros({2}, {.requires_grad = true}), b = zeros({1}, {.requires_grad = true});
  a.set_grad(tensor<float>({3, 0}));
  b.set_grad(tensor<float>({4}));
  CHECK(clip_grad_norm_({a, b}, 10.0) == Approx(5.0));  // below the limit: unchanged
  CHECK(a.grad().to_vector<float>() == std::vector<float>{3, 0});
  CHECK(clip_grad_norm_({a, b}, 1.0) == Approx(5.0));
  const double coef = 1.0 / (5.0 + 1e-6);
  CHECK(a.grad().to_vector<float>()[0] == Approx(3 * coef));
  CHECK(b.grad().to_vector<float>()[0] == Approx(4 * coef));
  b.set_grad(tensor<float>({-7}));
  CHECK(clip_grad_norm_({a, b}, 100.0, std::numeric_limits<double>::infinity()) == Approx(7.0));
  CHECK(clip_grad_norm_({}, 1.0) == 0.0);
  CHECK_THROWS_WITH(clip_grad_norm_({a}, -1.0), Contains("max_norm must be >= 0"));
}
