// `ember train metric`: trains an embedding network (mnist_embedding_net) on MNIST or
// Fashion-MNIST with a metric-learning loss on class-balanced batches, and after every epoch
// scores retrieval on the test set (P@1, R-Precision, MAP@R: retrieval_metrics.h). Checkpoints,
// --resume (bitwise on the CPU), the CSV log and the SVG plot work as in `ember train mnist`.
//
// Under `mpirun -np N` (Note [Training under mpirun], data_parallel.h) the class-balanced batch
// is the global one, batch_size x N: every rank draws the same one and loads its slice
// (datasets/batch_shard_sampler.h), the loss sees every rank's embeddings together
// (nn/distributed/global_batch_loss.h), a loss module's parameters are averaged like the model's,
// and each rank embeds its share of the test set before all of them score the gathered
// embeddings. So N ranks at batch B train what one process trains at batch N x B.
//
//   TrainMetricConfig c;           // defaults: ntxent, dim 128, 16 per class, Adam, cosine lr
//   c.data = "data/mnist";
//   TrainMetricResult r = train_metric(c, std::cout, std::cerr, Progress::stderr_is_terminal());
//   std::cout << r.metrics.precision_at_1 << "\n";
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "apps/train/metric_losses.h"
#include "apps/train/retrieval_metrics.h"
#include "apps/train/training_options.h"
#include "core/json.h"

namespace ember::apps {

// The shared options (training_options.h) with the metric-learning recipe's defaults, plus the
// loss, the embedding size and the sampler.
struct TrainMetricConfig : TrainingOptions {
  TrainMetricConfig();
  std::string loss = "ntxent";  // a row of metric_loss_table()
  int64_t dim = 128;            // embedding size
  int64_t per_class = 16;       // samples of each class in a batch; batch_size / per_class classes

  Json to_json() const;
  // Reads the fields a checkpoint stored (unknown keys are an error naming them).
  static TrainMetricConfig from_json(const Json& json, const std::string& where = "config");
  // What is wrong with the flags' combination, in the flags' words ("" when nothing is): the
  // CLI reports it as a usage error. Both datasets have 10 classes.
  std::string flag_problem(const std::vector<MetricLossRow>& losses = metric_loss_table()) const;
};

struct TrainMetricResult {
  RetrievalMetrics metrics;  // after the last epoch
  double train_loss = 0;     // mean over the last epoch
  double seconds = 0;        // training time, all epochs of this process
};

// Results go to `out`; a progress bar per epoch goes to `progress` when `interactive`.
// `losses` is the table --loss is looked up in (tests add their own rows).
TrainMetricResult train_metric(const TrainMetricConfig& config, std::ostream& out, std::ostream& progress,
                               bool interactive, const std::vector<MetricLossRow>& losses = metric_loss_table());

}  // namespace ember::apps
