// The table of metric losses (metric_losses.h).
//
// Note [Adding a loss]: append one row to the table in metric_loss_table() below; the CLI's
// --loss check, its --help text, the error for unknown names, the optimizer (for a module's
// parameters) and the checkpoints all follow from the table. The loss's header must be
// reachable from losses/losses.h (where every loss is listed), or be included here.
#include "apps/train/metric_losses.h"

#include "core/error.h"
#include "losses/losses.h"

namespace ember::apps {

const std::vector<MetricLossRow>& metric_loss_table() {
  static const std::vector<MetricLossRow> table = {
      {"ntxent", "NT-Xent, temperature 0.07 (PML NTXentLoss)",
       [](const MetricLossContext&) {
         return function_loss([](const Tensor& e, const Tensor& y) { return ntxent_loss(e, y, NTXentOptions{}); });
       }},
      {"supcon", "supervised contrastive, temperature 0.1 (PML SupConLoss)",
       [](const MetricLossContext&) {
         return function_loss([](const Tensor& e, const Tensor& y) { return supcon_loss(e, y, SupConOptions{}); });
       }},
      {"contrastive", "contrastive, margins 0 and 1 on L2 distances (PML ContrastiveLoss)",
       [](const MetricLossContext&) {
         return function_loss(
             [](const Tensor& e, const Tensor& y) { return contrastive_loss(e, y, ContrastiveOptions{}); });
       }},
      {"triplet", "triplet margin 0.05 over all triplets (PML TripletMarginLoss)",
       [](const MetricLossContext&) {
         return function_loss(
             [](const Tensor& e, const Tensor& y) { return triplet_margin_loss(e, y, TripletOptions{}); });
       }},
      {"batch-hard", "triplet margin 0.05 on batch-hard triplets (PML BatchHardMiner)",
       [](const MetricLossContext&) {
         return function_loss([](const Tensor& e, const Tensor& y) {
           return triplet_margin_loss(e, y, batch_hard_miner(e, y), TripletOptions{});
         });
       }},
      {"multisim", "multi-similarity, alpha 2, beta 50, base 0.5 (PML MultiSimilarityLoss)",
       [](const MetricLossContext&) {
         return function_loss(
             [](const Tensor& e, const Tensor& y) { return multi_similarity_loss(e, y, MultiSimilarityOptions{}); });
       }},
      {"arcface", "ArcFace, margin 28.6 degrees, scale 64, one weight per class (PML ArcFaceLoss)",
       [](const MetricLossContext& c) {
         return module_loss(std::make_shared<ArcFaceLoss>(c.num_classes, c.embedding_size, ArcFaceOptions{}, c.gen));
       }},
      {"proxyanchor", "Proxy Anchor, margin 0.1, alpha 32, one proxy per class (PML ProxyAnchorLoss)",
       [](const MetricLossContext& c) {
         return module_loss(
             std::make_shared<ProxyAnchorLoss>(c.num_classes, c.embedding_size, ProxyAnchorOptions{}, c.gen));
       }},
  };
  return table;
}

std::vector<std::string> metric_loss_names(const std::vector<MetricLossRow>& table) {
  std::vector<std::string> names;
  for (const MetricLossRow& row : table) names.push_back(row.name);
  return names;
}

std::string metric_loss_list(const std::vector<MetricLossRow>& table) {
  std::string list;
  for (const MetricLossRow& row : table) list += (list.empty() ? "" : ", ") + row.name;
  return list;
}

std::unique_ptr<MetricLoss> make_metric_loss(const std::string& name, const MetricLossContext& context,
                                             const std::vector<MetricLossRow>& table) {
  for (const MetricLossRow& row : table)
    if (row.name == name) return row.make(context);
  EMBER_FAIL("unknown loss '", name, "' (this build has: ", metric_loss_list(table), ")");
}

}  // namespace ember::apps
