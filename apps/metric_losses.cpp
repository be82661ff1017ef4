#include "apps/metric_losses.h"

#include "core/error.h"
#include "losses/losses.h"

namespace ember::apps {

namespace {

// A loss that is a plain function of (embeddings, labels) with its default options.
template <class Fn>
MetricLossEntry function_loss(std::string name, Fn fn) {
  return {std::move(name), false, [fn](int64_t, int64_t, Generator*) { return MetricLoss{fn, nullptr}; }};
}

}  // namespace

const std::vector<MetricLossEntry>& metric_losses() {
  static const std::vector<MetricLossEntry> entries = {
      function_loss("ntxent", [](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y); }),
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
