#include "apps/metric_losses.h"

#include <type_traits>
#include <utility>

#include "core/error.h"
#include "losses/losses.h"

namespace ember::apps {

namespace {

// A loss that is a plain function of (embeddings, labels) with its default options.
template <class Fn>
MetricLossEntry function_loss(std::string name, Fn fn) {
  return {std::move(name), false, [fn](int64_t, int64_t, Generator*) { return MetricLoss{fn, nullptr}; }};
}

// A loss that is a Module holding one weight per class (ArcFace's W, ProxyAnchor's proxies).
template <class ModuleLoss>
MetricLossEntry module_loss(std::string name) {
  return {std::move(name), true, [](int64_t classes, int64_t dim, Generator* gen) {
            using Options = std::decay_t<decltype(std::declval<ModuleLoss>().options())>;
            auto module = std::make_shared<ModuleLoss>(classes, dim, Options{}, gen);
            return MetricLoss{[module](const Tensor& e, const Tensor& y) { return (*module)(e, y); }, module};
          }};
}

}  // namespace

const std::vector<MetricLossEntry>& metric_losses() {
  static const std::vector<MetricLossEntry> entries = {
      function_loss("ntxent", [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y); }),
      function_loss("supcon", [](const Tensor& e, const Tensor& y) { return supcon_loss(e, y); }),
      function_loss("contrastive", [](const Tensor& e, const Tensor& y) { return contrastive_loss(e, y); }),
      function_loss("triplet", [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y); }),
      function_loss("batch-hard",
                    [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y, batch_hard_miner(e, y)); }),
      function_loss("multisim", [](const Tensor& e, const Tensor& y) { return multi_similarity_loss(e, y); }),
      module_loss<ArcFaceLoss>("arcface"),
      module_loss<ProxyAnchorLoss>("proxyanchor"),
  };
  return entries;
}

const MetricLossEntry& metric_loss(const std::string& name) {
  for (const MetricLossEntry& e : metric_losses())
    if (e.name == name) return e;
  EMBER_FAIL("unknown metric loss '", name, "' (this build has ", metric_loss_names(), ")");
}

std::string metric_loss_names() {
  std::string names;
  for (const MetricLossEntry& e : metric_losses()) names += (names.empty() ? "" : "|") + e.name;
  return names;
}

}  // namespace ember::apps
