// The metric-loss table (apps/train/metric_losses.h): rows build the loss they name, unknown
// names list what the build has, and the adapters expose a module's parameters and state.
#include <catch2/catch.hpp>

#include <cmath>

#include "apps/train/metric_losses.h"
#include "ember.h"
#include "toy_proxy_loss.h"

using namespace ember;
using namespace ember::apps;

TEST_CASE("metric losses: the ntxent row computes ntxent_loss and has nothing to train") {
  Generator gen(2);
  const Tensor e = randn({8, 4}, {}, &gen);
  Tensor y = Tensor::empty({8}, {.dtype = DType::i64});
  for (int64_t i = 0; i < 8; ++i) y.data<int64_t>()[i] = i % 3;
  auto loss = make_metric_loss("ntxent", {.num_classes = 3, .embedding_size = 4});
  CHECK((*loss)(e, y).item() == ntxent_loss(e, y).item());
  CHECK(loss->parameters().empty());
  CHECK(loss->state_dict().empty());
  CHECK(metric_loss_names() == std::vector<std::string>{"ntxent", "supcon", "contrastive", "triplet", "batch-hard",
                                                       "multisim", "arcface", "proxyanchor"});
}

TEST_CASE("metric losses: every row computes its loss, and the class losses train their weights") {
  Generator gen(3);
  const Tensor e = randn({8, 4}, {}, &gen);
  Tensor y = Tensor::empty({8}, {.dtype = DType::i64});
  for (int64_t i = 0; i < 8; ++i) y.data<int64_t>()[i] = i % 3;
  for (const std::string& name : metric_loss_names()) {
    INFO("loss " << name);
    auto loss = make_metric_loss(name, {.num_classes = 3, .embedding_size = 4, .gen = &gen});
    const Tensor l = (*loss)(e, y);
    CHECK(l.dim() == 0);
    CHECK(std::isfinite(l.item()));
    const bool class_loss = name == "arcface" || name == "proxyanchor";
    CHECK(loss->parameters().size() == (class_loss ? 1u : 0u));
  }
}

TEST_CASE("metric losses: an unknown name is an error that lists the losses of this build") {
  CHECK_THROWS_WITH(make_metric_loss("circle", {}),
                    Catch::Contains("unknown loss 'circle' (this build has: ntxent, supcon, contrastive, triplet, "
                                    "batch-hard, multisim, arcface, proxyanchor)"));
}

TEST_CASE("metric losses: a module row trains and saves the module's parameters") {
  const std::vector<MetricLossRow> table = {
      {"toy", "test", [](const MetricLossContext& c) {
         return module_loss(std::make_shared<test::ToyProxyLoss>(c.num_classes, c.embedding_size, c.gen));
       }}};
  Generator gen(4);
  auto loss = make_metric_loss("toy", {.num_classes = 3, .embedding_size = 5, .gen = &gen}, table);
  REQUIRE(loss->parameters().size() == 1);
  CHECK(loss->parameters()[0].shape() == Shape{3, 5});
  CHECK(loss->state_dict().count("proxies") == 1);
  // Gradients reach the proxies; load_state_dict writes into the trained tensor.
  const Tensor e = randn({6, 5}, {}, &gen);
  Tensor y = Tensor::empty({6}, {.dtype = DType::i64});
  for (int64_t i = 0; i < 6; ++i) y.data<int64_t>()[i] = i % 3;
  (*loss)(e, y).backward();
  CHECK(loss->parameters()[0].grad().defined());
  loss->load_state_dict({{"proxies", zeros({3, 5})}});
  CHECK(loss->parameters()[0].to_vector<float>() == std::vector<float>(15, 0.0f));
  CHECK(metric_loss_list(table) == "toy");
}
