// `ember train mnist`: train_mnist() at the bottom reads as the table of contents of a run; the
// helpers above it come in the order it calls them. The loop, optimizer, schedule and
// checkpoint state are shared with the other train commands (training_loop.h).
#include "apps/train/train_mnist.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/data_parallel.h"
#include "apps/train/progress.h"
#include "apps/train/run_log.h"
#include "apps/train/training_loop.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "ember.h"

namespace ember::apps {
namespace {

// Everything a run holds between epochs.
struct MnistRun {
  TrainMnistConfig config;
  DataParallelRun parallel{nullptr};  // Note [Training under mpirun]
  std::shared_ptr<MnistDataset> train_data, test_data;
  std::shared_ptr<Module> model;    // what is evaluated and saved
  std::shared_ptr<Module> trained;  // what the steps run: model, or its DistributedDataParallel
  TrainingState state;
};

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

std::string model_title(const TrainMnistConfig& c) { return c.model + " on " + c.dataset; }

TrainMnistConfig config_for_resume(const TrainMnistConfig& given, const TrainingCheckpoint& resumed) {
  const std::string where = "checkpoint '" + given.resume + "' config";
  TrainMnistConfig c = TrainMnistConfig::from_json(Json::parse(resumed.config, where), where);
  check_resume_conflicts(c.to_json(), given.to_json(), given.explicit_keys, "train mnist");
  c.take_run_control(given);
  return c;
}

// Seeds the run, loads the data and builds the model, optimizer, loader and schedule. The seed is
// set first so that it alone decides the initial weights; the loader shuffles with seed + 1.
MnistRun start_run(const TrainMnistConfig& c) {
  MnistRun run;
  run.config = c;
  run.parallel = DataParallelRun(c.group);
  run.state.device = training_device(c.device);
  manual_seed(c.seed);
  run.train_data = std::make_shared<MnistDataset>(c.data, true);
  run.test_data = std::make_shared<MnistDataset>(c.data, false);
  check_datasets(*run.train_data, *run.test_data, c, "train mnist");
  run.model = make_mnist_model(c.model);
  run.model->to(run.state.device);
  run.trained = run.parallel.replicate(run.model);  // rank 0's weights on every rank
  auto [decay, no_decay] = split_weight_decay(*run.model);
  run.state.optimizer = make_optimizer(c, std::move(decay), std::move(no_decay));
  run.state.set_precision(c.precision);
  DataLoaderOptions options;
  options.batch_size = c.batch_size;
  options.shuffle = true;
  options.drop_last = false;
  options.seed = c.seed + 1;
  options.sampler = run.parallel.sampler(run.train_data->size());
  run.state.loader = std::make_unique<DataLoader>(run.train_data, options);
  run.state.schedule = make_schedule(c, *run.state.optimizer, *run.state.loader);
  return run;
}

void restore_run(MnistRun& run, const TrainingCheckpoint& resumed, std::ostream& out) {
  run.model->load_state_dict(resumed.model);
  restore_training_state(run.state, resumed);
  out << resumed_message(run.config, run.state);
}

void print_run_header(const MnistRun& run, std::ostream& out) {
  const TrainMnistConfig& c = run.config;
  out << "train " << model_title(c) << ": " << run.train_data->size() << " train / " << run.test_data->size()
      << " test images, " << run.model->num_parameters() << " parameters, " << c.optimizer << " lr " << c.lr
      << (c.schedule == "cosine" ? " (cosine)" : "") << ", batch " << c.batch_size
      << (run.parallel.distributed() ? " per rank x " + std::to_string(run.parallel.world_size()) + " ranks" : "")
      << ", " << num_threads() << " threads, device " << run.state.device << "\n";
  out << run.model->summary({1, 1, 28, 28});
}

// One optimizer step on a batch; returns the batch's mean loss.
double train_step(MnistRun& run, const Batch& batch) {
  Tensor x = batch.inputs.to(run.state.device), y = batch.targets.to(run.state.device);
  return optimizer_step(run.state, cross_entropy((*run.trained)(x), y));
}

// Mean cross-entropy and accuracy on the test set, in chunks of 1000 images (each rank scores its
// shard; the sums are all-reduced).
Evaluation evaluate(Module& model, const TensorDataset& test, Device device, const DataParallelRun& parallel) {
  autograd::NoGradGuard no_grad;
  model.eval();
  const int64_t n = test.size(), chunk = 1000;
  const auto [begin, end] = parallel.shard_range(n);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = begin; start < end; start += chunk) {
    const int64_t len = std::min(chunk, end - start);
    Tensor x = test.inputs().narrow(0, start, len).to(device);
    Tensor y = test.targets().narrow(0, start, len).to(device);
    Tensor logits = model(x);
    loss_sum += cross_entropy(logits, y, Reduction::sum).item();
    correct += int64_t(sum(eq(argmax(logits, 1), y).to(DType::i64)).item());
  }
  model.train();
  std::vector<double> sums{loss_sum, double(correct)};
  parallel.sum(sums);
  return {sums[0] / double(n), sums[1] / double(n)};
}

void print_epoch(const EpochRecord& rec, const EpochStats& stats, int epochs, std::ostream& out) {
  out << "epoch " << rec.epoch << "/" << epochs << "  train loss " << bench::fixed(rec.train_loss, 4)
      << "  test loss " << bench::fixed(*rec.test_loss, 4) << "  test accuracy "
      << bench::fixed(100 * rec.scores[0].second, 2) << "%  " << epoch_time(stats) << std::endl;
}

TrainingCheckpoint make_checkpoint(const MnistRun& run, int64_t epochs_done) {
  TrainingCheckpoint ck = training_checkpoint(run.state, epochs_done);
  ck.model = run.model->state_dict();
  ck.config = run.config.to_json().dump();
  return ck;
}


}  // namespace

TrainMnistResult train_mnist(const TrainMnistConfig& given, std::ostream& console, std::ostream& progress_console,
                             bool interactive) {
  // Before any work: a bad --save should not cost an epoch. Rank 0 alone writes them.
  if (!given.group || given.group->rank() == 0) given.check_outputs("train mnist");
  std::optional<TrainingCheckpoint> resumed;
  if (!given.resume.empty()) resumed = load_checkpoint(given.resume);
  RunLog log = run_log_so_far(resumed);  // the whole run's epochs, those before a resume too
  TrainMnistConfig c = resumed ? config_for_resume(given, *resumed) : given;
  const int world_size = c.group ? c.group->size() : 1;
  if (!resumed) c.ranks = world_size;
  const std::string refitted = c.fit_to_ranks(world_size, "train mnist");  // Note [Batch size across rank counts]
  c.check("train mnist");
  MnistRun run = start_run(c);
  std::ostream& out = run.parallel.leads() ? console : run.parallel.silent();
  std::ostream& progress_out = run.parallel.leads() ? progress_console : run.parallel.silent();
  if (resumed) restore_run(run, *resumed, out);
  if (!refitted.empty()) out << refitted << "\n";
  print_run_header(run, out);

  TrainMnistResult result;
  const InterruptGuard interrupt_guard;  // Note [Ctrl-C]
  for (int64_t epoch = run.state.start_epoch, end = end_epoch(c); epoch < end; ++epoch) {
    EpochStats stats = train_epoch(run.state, c, epoch, progress_out, interactive,
                                   [&](const Batch& batch) { return train_step(run, batch); });
    if (stats.interrupted) stop_interrupted(run.state, c, epoch);
    sum_over_ranks(stats, run.parallel);
    const Evaluation ev = evaluate(*run.model, *run.test_data, run.state.device, run.parallel);
    const EpochRecord rec{.epoch = int(epoch + 1), .train_loss = stats.mean_loss(), .test_loss = ev.loss,
                          .scores = {{"test_accuracy", ev.accuracy}}, .seconds = stats.seconds,
                          .lr = run.state.optimizer->lr()};
    log.add(rec);
    print_epoch(rec, stats, c.epochs, out);
    result.test_accuracy = ev.accuracy;
    result.test_loss = ev.loss;
    result.seconds += rec.seconds;
    run.parallel.after_outputs(
        [&] { write_epoch_outputs(c, [&] { return make_checkpoint(run, epoch + 1); }, log, model_title(run.config)); });
  }
  if (!c.save.empty()) out << "checkpoint: " << c.save << "\n";
  return result;
}

}  // namespace ember::apps
