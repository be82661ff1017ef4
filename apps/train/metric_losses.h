// The metric-learning losses `ember train metric --loss NAME` can train with: one table row per
// loss, from a name to a factory. A row wraps either a loss function (nothing to train) or a loss
// Module whose parameters (ArcFace's "W", ProxyAnchor's "proxies") the optimizer trains with the
// model and checkpoints save under "loss.".
//
//   std::unique_ptr<MetricLoss> loss = make_metric_loss("ntxent", {.num_classes = 10, .embedding_size = 128});
//   Tensor l = (*loss)(model(x), labels);                 // (B, D), (B) i64 -> scalar
//   for (const Tensor& p : loss->parameters()) params.push_back(p);   // none for function losses
//
// Adding a loss is adding its row to the table in metric_losses.cpp (see the Note there):
//   {"supcon", "supervised contrastive", [](const MetricLossContext&) {
//      return function_loss([](const Tensor& e, const Tensor& y) { return supcon_loss(e, y, SupConOptions{}); }); }},
//   {"arcface", "additive angular margin", [](const MetricLossContext& c) {
//      return module_loss(std::make_shared<ArcFaceLoss>(c.num_classes, c.embedding_size, ArcFaceOptions{}, c.gen)); }},
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "nn/state_dict.h"

namespace ember::apps {

// A loss on (embeddings (B, D), labels (B) i64), with whatever state it trains.
class MetricLoss {
 public:
  virtual ~MetricLoss() = default;
  virtual Tensor operator()(const Tensor& embeddings, const Tensor& labels) = 0;
  // What the optimizer trains besides the model (empty for function losses).
  virtual std::vector<Tensor> parameters() const { return {}; }
  // What a checkpoint saves and restores (parameters and buffers).
  virtual StateDict state_dict() const { return {}; }
  virtual void load_state_dict(const StateDict& state) {}
  virtual void to(Device device) {}
  // The loss Module, for a data-parallel run to average its parameters' gradients over the ranks
  // (null for function losses).
  virtual std::shared_ptr<Module> module() const { return nullptr; }
};

// What a factory may need: the classes in the data, the embedding size, and the generator for
// a module's initial weights (null: the default generator).
struct MetricLossContext {
  int64_t num_classes = 0;
  int64_t embedding_size = 0;
  Generator* gen = nullptr;
};

struct MetricLossRow {
  std::string name;         // the --loss value
  std::string description;  // one line for --help
  std::function<std::unique_ptr<MetricLoss>(const MetricLossContext&)> make;
};

// The losses this build has, in --help order.
const std::vector<MetricLossRow>& metric_loss_table();
std::vector<std::string> metric_loss_names(const std::vector<MetricLossRow>& table = metric_loss_table());
// "ntxent, supcon": the names for messages.
std::string metric_loss_list(const std::vector<MetricLossRow>& table = metric_loss_table());
// The row's loss; an unknown name is an Error that lists the losses this build has.
std::unique_ptr<MetricLoss> make_metric_loss(const std::string& name, const MetricLossContext& context,
                                             const std::vector<MetricLossRow>& table = metric_loss_table());

// ---- adapters for rows ----------------------------------------------------------------------

// A loss function: f(embeddings, labels) -> scalar Tensor.
template <class F>
std::unique_ptr<MetricLoss> function_loss(F f) {
  struct FunctionLoss : MetricLoss {
    explicit FunctionLoss(F fn) : fn(std::move(fn)) {}
    Tensor operator()(const Tensor& e, const Tensor& y) override { return fn(e, y); }
    F fn;
  };
  return std::make_unique<FunctionLoss>(std::move(f));
}

// A loss Module M with Tensor operator()(embeddings, labels): its parameters are trained and
// its state_dict checkpointed.
template <class M>
std::unique_ptr<MetricLoss> module_loss(std::shared_ptr<M> module) {
  struct ModuleLoss : MetricLoss {
    explicit ModuleLoss(std::shared_ptr<M> m) : m(std::move(m)) {}
    Tensor operator()(const Tensor& e, const Tensor& y) override { return (*m)(e, y); }
    std::vector<Tensor> parameters() const override { return m->parameters(); }
    StateDict state_dict() const override { return m->state_dict(); }
    void load_state_dict(const StateDict& state) override { m->load_state_dict(state); }
    void to(Device device) override { m->to(device); }
    std::shared_ptr<Module> module() const override { return m; }
    std::shared_ptr<M> m;
  };
  return std::make_unique<ModuleLoss>(std::move(module));
}

}  // namespace ember::apps
