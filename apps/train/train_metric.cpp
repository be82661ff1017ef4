// `ember train metric`: train_metric() at the bottom reads as the table of contents of a run; the
// helpers above it come in the order it calls them. The loop, optimizer, schedule and checkpoint
// state are shared with `ember train mnist` (training_loop.h).
#include "apps/train/train_metric.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/data_parallel.h"
#include "apps/train/progress.h"
#include "apps/train/run_log.h"
#include "apps/train/training_loop.h"
#include "datasets/class_balanced_sampler.h"
#include "ember.h"

namespace ember::apps {
namespace {

// Checkpoint names of the loss's state (a module loss's parameters): "loss.<name>" beside the
// model's own entries in TrainingCheckpoint::model.
const std::string loss_prefix = "loss.";

// Everything a run holds between epochs.
struct MetricRun {
  TrainMetricConfig config;
  DataParallelRun parallel{nullptr};  // Note [Training under mpirun]
  std::shared_ptr<MnistDataset> train_data, test_data;
  std::shared_ptr<Module> model;    // what is evaluated and saved
  std::shared_ptr<Module> trained;  // what the steps run: model, or its DistributedDataParallel
  std::unique_ptr<MetricLoss> loss;
  std::shared_ptr<Module> trained_loss;  // a loss module's DistributedDataParallel under mpirun
  TrainingState state;
};

std::string run_title(const TrainMetricConfig& c) {
  return "mnist_embedding_net (dim " + std::to_string(c.dim) + ", " + c.loss + ") on " + c.dataset;
}

TrainMetricConfig config_for_resume(const TrainMetricConfig& given, const TrainingCheckpoint& resumed) {
  const std::string where = "checkpoint '" + given.resume + "' config";
  TrainMetricConfig c = TrainMetricConfig::from_json(Json::parse(resumed.config, where), where);
  check_resume_conflicts(c.to_json(), given.to_json(), given.explicit_keys, "train metric");
  c.take_run_control(given);
  return c;
}

// Under mpirun every rank's loss sees the global batch of batch_size x ranks (train_metric.h), so
// the batch layout is checked on that.
void check_config(const TrainMetricConfig& c, const std::vector<MetricLossRow>& losses) {
  c.check("train metric");
  const std::string problem = c.flag_problem(losses);
  EMBER_CHECK(problem.empty(), "train metric: ", problem);
}

// The model's and the loss's parameters, split into the weight-decay groups.
std::unique_ptr<Optimizer> make_run_optimizer(const TrainMetricConfig& c, const Module& model, const MetricLoss& loss) {
  auto [decay, no_decay] = split_weight_decay(model);
  for (const Tensor& p : loss.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  return make_optimizer(c, std::move(decay), std::move(no_decay));
}

// Batches of global_batch / per_class classes x per_class images (datasets/class_balanced_sampler.h),
// of which this rank loads its slice of batch_size.
std::unique_ptr<DataLoader> make_balanced_loader(const TrainMetricConfig& c, std::shared_ptr<MnistDataset> data,
                                                 const DataParallelRun& parallel) {
  DataLoaderOptions options;
  options.batch_size = c.batch_size;
  options.drop_last = true;
  options.seed = c.seed + 1;
  auto global = std::make_shared<ClassBalancedSampler>(
      data->targets(), ClassBalancedOptions{.per_class = c.per_class, .batch_size = c.global_batch()});
  options.sampler = parallel.batch_sampler(std::move(global), c.batch_size);
  return std::make_unique<DataLoader>(std::move(data), options);
}

int64_t count_classes(const Tensor& labels) {
  const std::vector<int64_t> y = labels.to_vector<int64_t>();
  return y.empty() ? 0 : *std::max_element(y.begin(), y.end()) + 1;
}

// Seeds the run, loads the data and builds the model, loss, optimizer, loader and schedule. The
// seed is set first so that it alone decides the initial weights (model, then loss); the sampler
// draws with seed + 1.
MetricRun start_run(const TrainMetricConfig& c, const std::vector<MetricLossRow>& losses) {
  MetricRun run;
  run.config = c;
  run.parallel = DataParallelRun(c.group);
  run.state.device = training_device(c.device);
  manual_seed(c.seed);
  run.train_data = std::make_shared<MnistDataset>(c.data, true);
  run.test_data = std::make_shared<MnistDataset>(c.data, false);
  check_datasets(*run.train_data, *run.test_data, c, "train metric");
  run.model = mnist_embedding_net(c.dim);
  run.model->to(run.state.device);
  run.loss = make_metric_loss(c.loss, {.num_classes = count_classes(run.train_data->targets()), .embedding_size = c.dim},
                              losses);
  run.loss->to(run.state.device);
  run.trained = run.parallel.replicate(run.model);  // rank 0's weights on every rank
  if (std::shared_ptr<Module> loss_module = run.loss->module()) run.trained_loss = run.parallel.replicate(loss_module);
  run.state.optimizer = make_run_optimizer(c, *run.model, *run.loss);
  run.state.set_precision(c.precision);
  run.state.loader = make_balanced_loader(c, run.train_data, run.parallel);
  run.state.schedule = make_schedule(c, *run.state.optimizer, *run.state.loader);
  return run;
}

// The model's entries of a checkpoint: everything not under loss_prefix.
StateDict model_entries(const StateDict& all) {
  StateDict model;
  for (const auto& [name, t] : all)
    if (name.rfind(loss_prefix, 0) != 0) model.emplace(name, t);
  return model;
}

void restore_run(MetricRun& run, const TrainingCheckpoint& resumed, std::ostream& out) {
  run.model->load_state_dict(model_entries(resumed.model));
  run.loss->load_state_dict(sub_state_dict(resumed.model, loss_prefix));
  restore_training_state(run.state, resumed);
  out << resumed_message(run.config, run.state);
}

void print_run_header(const MetricRun& run, std::ostream& out) {
  const TrainMetricConfig& c = run.config;
  out << "train " << run_title(c) << ": " << run.train_data->size() << " train / " << run.test_data->size()
      << " test images, " << run.model->num_parameters() << " parameters, " << c.optimizer << " lr " << c.lr
      << (c.schedule == "cosine" ? " (cosine)" : "") << ", batch " << c.global_batch() << " ("
      << c.global_batch() / c.per_class << " classes x " << c.per_class << ")"
      << (run.parallel.distributed() ? ", " + std::to_string(c.batch_size) + " per rank x " +
                                           std::to_string(run.parallel.world_size()) + " ranks"
                                     : "")
      << ", " << num_threads() << " threads, device " << run.state.device << "\n";
  out << run.model->summary({1, 1, 28, 28});
}

// One optimizer step on a batch; returns the batch's loss (under mpirun, the global batch's).
double train_step(MetricRun& run, const Batch& batch) {
  Tensor x = batch.inputs.to(run.state.device), y = batch.targets.to(run.state.device);
  Tensor loss = run.parallel.loss_over_ranks((*run.trained)(x), y,
                                             [&](const Tensor& e, const Tensor& l) { return (*run.loss)(e, l); });
  return optimizer_step(run.state, loss);
}

// Embeds the test set in chunks of 1000 images and scores retrieval over it. Under mpirun each
// rank embeds its shard and every rank scores the gathered embeddings.
RetrievalMetrics evaluate(Module& model, const TensorDataset& test, Device device, const DataParallelRun& parallel) {
  autograd::NoGradGuard no_grad;
  model.eval();
  const int64_t chunk = 1000;
  const auto [begin, end] = parallel.shard_range(test.size());
  std::vector<Tensor> parts;
  for (int64_t start = begin; start < end; start += chunk)
    parts.push_back(model(test.inputs().narrow(0, start, std::min(chunk, end - start)).to(device)));
  model.train();
  return retrieval_metrics(parallel.gather_rows(cat(parts, 0)).cpu(), test.targets());
}

EpochRecord epoch_record(int64_t epoch, const EpochStats& stats, const RetrievalMetrics& m, double lr) {
  return {.epoch = int(epoch + 1), .train_loss = stats.mean_loss(), .test_loss = std::nullopt,
          .scores = {{"precision_at_1", m.precision_at_1}, {"r_precision", m.r_precision}, {"map_at_r", m.map_at_r}},
          .seconds = stats.seconds, .lr = lr};
}

void print_epoch(const EpochRecord& rec, const EpochStats& stats, double eval_seconds, int epochs, std::ostream& out) {
  out << "epoch " << rec.epoch << "/" << epochs << "  train loss " << bench::fixed(rec.train_loss, 4) << "  P@1 "
      << bench::fixed(rec.scores[0].second, 4) << "  R-Prec " << bench::fixed(rec.scores[1].second, 4) << "  MAP@R "
      << bench::fixed(rec.scores[2].second, 4) << "  " << epoch_time(stats) << ", test " << format_duration(eval_seconds)
      << std::endl;
}

TrainingCheckpoint make_checkpoint(const MetricRun& run, int64_t epochs_done) {
  TrainingCheckpoint ck = training_checkpoint(run.state, epochs_done);
  ck.model = run.model->state_dict();
  add_prefixed(ck.model, loss_prefix, run.loss->state_dict());
  ck.config = run.config.to_json().dump();
  return ck;
}


}  // namespace

TrainMetricResult train_metric(const TrainMetricConfig& given, std::ostream& console, std::ostream& progress_console,
                               bool interactive, const std::vector<MetricLossRow>& losses) {
  // Before any work: a bad --save should not cost an epoch. Rank 0 alone writes them.
  if (!given.group || given.group->rank() == 0) given.check_outputs("train metric");
  std::optional<TrainingCheckpoint> resumed;
  if (!given.resume.empty()) resumed = load_checkpoint(given.resume);
  RunLog log = run_log_so_far(resumed);  // the whole run's epochs, those before a resume too
  TrainMetricConfig c = resumed ? config_for_resume(given, *resumed) : given;
  const int world_size = c.group ? c.group->size() : 1;
  if (!resumed) c.ranks = world_size;
  const std::string refitted = c.fit_to_ranks(world_size, "train metric");  // Note [Batch size across rank counts]
  check_config(c, losses);
  MetricRun run = start_run(c, losses);
  std::ostream& out = run.parallel.leads() ? console : run.parallel.silent();
  std::ostream& progress_out = run.parallel.leads() ? progress_console : run.parallel.silent();
  if (resumed) restore_run(run, *resumed, out);
  if (!refitted.empty()) out << refitted << "\n";
  print_run_header(run, out);

  TrainMetricResult result;
  const InterruptGuard interrupt_guard;  // Note [Ctrl-C]
  for (int64_t epoch = run.state.start_epoch, end = end_epoch(c); epoch < end; ++epoch) {
    EpochStats stats = train_epoch(run.state, c, epoch, progress_out, interactive,
                                   [&](const Batch& batch) { return train_step(run, batch); });
    if (stats.interrupted) stop_interrupted(run.state, c, epoch);
    sum_over_ranks(stats, run.parallel);
    const auto eval_start = std::chrono::steady_clock::now();
    result.metrics = evaluate(*run.model, *run.test_data, run.state.device, run.parallel);
    const double eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    const EpochRecord rec = epoch_record(epoch, stats, result.metrics, run.state.optimizer->lr());
    log.add(rec);
    print_epoch(rec, stats, eval_seconds, c.epochs, out);
    result.train_loss = rec.train_loss;
    result.seconds += rec.seconds;
    run.parallel.after_outputs(
        [&] { write_epoch_outputs(c, [&] { return make_checkpoint(run, epoch + 1); }, log, run_title(run.config)); });
  }
  if (!c.save.empty()) out << "checkpoint: " << c.save << "\n";
  return result;
}

}  // namespace ember::apps
