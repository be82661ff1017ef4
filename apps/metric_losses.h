// The metric-learning losses by the names the apps use (`ember train metric --loss`, the rows of
// `ember bench losses`), each ready to call as loss(embeddings, labels). Adding a loss to the
// apps is one row in metric_losses.cpp.
//
//   const MetricLossEntry& entry = metric_loss("ntxent");        // an Error lists the names
//   MetricLoss loss = entry.make(/*classes=*/10, /*dim=*/128, &gen);
//   Tensor l = loss(emb, labels);
//   if (loss.module) optimizer_params = loss.module->parameters();   // ArcFace W, ProxyAnchor proxies
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace ember::apps {

struct MetricLoss {
  std::function<Tensor(const Tensor& embeddings, const Tensor& labels)> call;
  std::shared_ptr<Module> module;  // the loss's own parameters (W, proxies), or null
  Tensor operator()(const Tensor& embeddings, const Tensor& labels) const { return call(embeddings, labels); }
};

struct MetricLossEntry {
  std::string name;         // "ntxent", "arcface", ...
  bool has_classes;         // a classification loss with one weight per class (ArcFace, ProxyAnchor)
  std::function<MetricLoss(int64_t classes, int64_t dim, Generator* gen)> make;
};

// Every loss this build has, in the order of issue #10's list.
const std::vector<MetricLossEntry>& metric_losses();
// The entry named `name`; an Error listing the names otherwise.
const MetricLossEntry& metric_loss(const std::string& name);
// "ntxent|supcon|...": the names, for help texts.
std::string metric_loss_names();

}  // namespace ember::apps
