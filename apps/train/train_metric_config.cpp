// TrainMetricConfig (train_metric.h): its defaults, its JSON in a checkpoint and its flag checks.
#include <string>

#include "apps/train/train_metric.h"
#include "core/error.h"
#include "core/json_fields.h"

namespace ember::apps {

// The default recipe: Adam lr 1e-3 with the cosine schedule, batches of 8 classes x 16, 4 epochs.
TrainMetricConfig::TrainMetricConfig() {
  epochs = 4;
  batch_size = 128;
  optimizer = "adam";
  lr = 1e-3;
}

Json TrainMetricConfig::to_json() const {
  Json j = Json::object();
  write_json(j);
  j.set("loss", loss);
  j.set("dim", dim);
  j.set("per_class", per_class);
  return j;
}

TrainMetricConfig TrainMetricConfig::from_json(const Json& j, const std::string& where) {
  TrainMetricConfig c;
  for (const auto& [key, value] : json_object(j, where)) {
    if (c.read_json_field(key, value, where)) continue;
    if (key == "loss") c.loss = json_string(value, where + ".loss");
    else if (key == "dim") c.dim = json_int(value, where + ".dim");
    else if (key == "per_class") c.per_class = json_int(value, where + ".per_class");
    else EMBER_FAIL("train metric: unknown configuration key '", key, "' in ", where);
  }
  return c;
}

std::string TrainMetricConfig::flag_problem(const std::vector<MetricLossRow>& losses) const {
  constexpr int64_t dataset_classes = 10;  // MNIST and Fashion-MNIST
  bool known = false;
  for (const MetricLossRow& row : losses) known = known || row.name == loss;
  if (!known) return "--loss: '" + loss + "' is not a loss of this build (it has: " + metric_loss_list(losses) + ")";
  if (dim < 1) return "--dim: the embedding size must be at least 1, got " + std::to_string(dim);
  if (per_class < 1) return "--per-class must be at least 1, got " + std::to_string(per_class);
  // Under mpirun the batch is the global one, batch_size x ranks (train_metric.cpp).
  const int64_t global = global_batch();
  const std::string batch =
      ranks == 1 ? "--batch-size " + std::to_string(batch_size)
                 : "--batch-size " + std::to_string(batch_size) + " x " + std::to_string(ranks) + " ranks = " +
                       std::to_string(global);
  if (global % per_class != 0)
    return batch + " must be a multiple of --per-class " + std::to_string(per_class) +
           " (a batch is classes x per-class)";
  if (global / per_class > dataset_classes)
    return batch + " / --per-class " + std::to_string(per_class) + " = " + std::to_string(global / per_class) +
           " classes per batch, but the dataset has " + std::to_string(dataset_classes) + " (use at most " +
           std::to_string(dataset_classes * per_class) + " images per " +
           (ranks == 1 ? "batch)" : "global batch: --batch-size " + std::to_string(dataset_classes * per_class / ranks) +
                                        " or less per rank)");
  return "";
}

}  // namespace ember::apps
