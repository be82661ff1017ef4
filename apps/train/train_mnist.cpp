// `ember train mnist`: train_mnist() at the bottom reads as the table of contents of a run; the
// helpers above it come in the order it calls them.
#include "apps/train/train_mnist.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/progress.h"
#include "apps/train/run_log.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "ember.h"

namespace ember::apps {
namespace {

// Everything a run holds between epochs.
struct MnistRun {
  TrainMnistConfig config;
  Device device;
  std::shared_ptr<MnistDataset> train_data, test_data;
  std::shared_ptr<Module> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<LrScheduler> schedule;  // null for --schedule none
  int64_t start_epoch = 0;
  int64_t step = 0;  // optimizer steps taken, over all epochs
};

struct EpochStats {
  double loss_sum = 0;  // summed over the images seen
  int64_t images = 0;
  double seconds = 0;
};

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

std::string model_title(const TrainMnistConfig& c) { return c.model + " on " + c.dataset; }

// A resumed run takes its recipe from the checkpoint; where the data lives, how long to train
// and what to write come from the command line (epochs <= 0 keeps the checkpoint's).
TrainMnistConfig config_for_resume(const TrainMnistConfig& given, const TrainingCheckpoint& resumed) {
  TrainMnistConfig c = TrainMnistConfig::from_json(Json::parse(resumed.config, "checkpoint config"));
  c.data = given.data;
  if (given.epochs > 0) c.epochs = given.epochs;
  c.save = given.save;
  c.log = given.log;
  c.plot = given.plot;
  c.max_batches = given.max_batches;
  c.stop_after = given.stop_after;
  c.resume = given.resume;
  return c;
}

void check_config(const TrainMnistConfig& c) {
  EMBER_CHECK(c.dataset == "mnist" || c.dataset == "fashion-mnist", "train mnist: unknown dataset '", c.dataset,
              "' (expected mnist or fashion-mnist)");
  EMBER_CHECK(c.epochs >= 1, "train mnist: epochs must be at least 1, got ", c.epochs);
  EMBER_CHECK(c.batch_size >= 1, "train mnist: batch size must be at least 1, got ", c.batch_size);
}

std::unique_ptr<Optimizer> make_optimizer(const TrainMnistConfig& c, const Module& model) {
  auto [decay, no_decay] = split_weight_decay(model);
  if (c.optimizer == "sgd") {
    const SgdOptions with{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay};
    SgdOptions without = with;
    without.weight_decay = 0;
    return std::make_unique<SGD>(std::vector<ParamGroup<SgdOptions>>{{decay, with}, {no_decay, without}});
  }
  const AdamOptions with{.lr = c.lr, .weight_decay = c.weight_decay};
  AdamOptions without = with;
  without.weight_decay = 0;
  std::vector<ParamGroup<AdamOptions>> groups{{decay, with}, {no_decay, without}};
  if (c.optimizer == "adam") return std::make_unique<Adam>(std::move(groups));
  if (c.optimizer == "adamw") return std::make_unique<AdamW>(std::move(groups));
  EMBER_FAIL("train mnist: unknown optimizer '", c.optimizer, "' (expected sgd, adam or adamw)");
}

// Batches per epoch: the whole training set, or the first max_batches of it (--dry-run).
int64_t batches_per_epoch(const TrainMnistConfig& c, const DataLoader& loader) {
  return c.max_batches > 0 ? std::min(c.max_batches, loader.size()) : loader.size();
}

// The schedule spans the whole run as configured (a resumed run continues the same curve).
std::unique_ptr<LrScheduler> make_schedule(const TrainMnistConfig& c, Optimizer& optimizer, const DataLoader& loader) {
  if (c.schedule != "cosine") return nullptr;
  return std::make_unique<CosineWithWarmup>(optimizer, 0, batches_per_epoch(c, loader) * c.epochs);
}

// Seeds the run, loads the data and builds the model, optimizer, loader and schedule. The seed is
// set first so that it alone decides the initial weights; the loader shuffles with seed + 1.
MnistRun start_run(const TrainMnistConfig& c) {
  MnistRun run;
  run.config = c;
  run.device = parse_device(c.device);
  manual_seed(c.seed);
  run.train_data = std::make_shared<MnistDataset>(c.data, true);
  run.test_data = std::make_shared<MnistDataset>(c.data, false);
  run.model = make_mnist_model(c.model);
  run.model->to(run.device);
  run.optimizer = make_optimizer(c, *run.model);
  EMBER_CHECK(c.schedule == "cosine" || c.schedule == "none", "train mnist: unknown schedule '", c.schedule,
              "' (expected cosine or none)");
  DataLoaderOptions options;
  options.batch_size = c.batch_size;
  options.shuffle = true;
  options.drop_last = false;
  options.seed = c.seed + 1;
  run.loader = std::make_unique<DataLoader>(run.train_data, options);
  run.schedule = make_schedule(c, *run.optimizer, *run.loader);
  return run;
}

// Puts the weights, optimizer, schedule, random generators and loader back where the checkpoint
// left them, so the rest of the run is bitwise identical to an uninterrupted one (on the CPU).
void restore_run(MnistRun& run, const TrainingCheckpoint& resumed, std::ostream& out) {
  run.model->load_state_dict(resumed.model);
  run.optimizer->load_state_dict(resumed.optimizer);
  if (run.schedule) run.schedule->load_state_dict(resumed.scheduler);
  restore_rng(default_generator(), resumed.rng.at("default"));
  const RngState ls = resumed.rng.at("loader");
  run.loader->set_state({ls.seed, ls.offset, resumed.counters.at("loader.epoch"), resumed.counters.at("loader.batch")});
  run.start_epoch = resumed.epoch;
  run.step = resumed.step;
  out << "resumed " << run.config.resume << " at epoch " << run.start_epoch << " (step " << run.step << ")\n";
}

void print_run_header(const MnistRun& run, std::ostream& out) {
  const TrainMnistConfig& c = run.config;
  out << "train " << model_title(c) << ": " << run.train_data->size() << " train / " << run.test_data->size()
      << " test images, " << run.model->num_parameters() << " parameters, " << c.optimizer << " lr " << c.lr
      << (c.schedule == "cosine" ? " (cosine)" : "") << ", batch " << c.batch_size << ", " << num_threads()
      << " threads, device " << run.device << "\n";
  out << run.model->summary({1, 1, 28, 28});
}

// The epoch after the last one this process trains: --stop-after ends the run early.
int64_t end_epoch(const TrainMnistConfig& c) {
  return c.stop_after > 0 ? std::min<int64_t>(c.epochs, c.stop_after) : c.epochs;
}

// One optimizer step on a batch; returns the batch's mean loss.
double train_step(MnistRun& run, const Batch& batch) {
  Tensor x = batch.inputs.to(run.device), y = batch.targets.to(run.device);
  Tensor loss = cross_entropy((*run.model)(x), y);
  run.optimizer->zero_grad();
  loss.backward();
  run.optimizer->step();
  if (run.schedule) run.schedule->step();
  ++run.step;
  // Reading the loss is the one host synchronisation per step (for display).
  return loss.item();
}

// One pass over the training set (or its first max_batches), with a progress bar.
EpochStats train_epoch(MnistRun& run, int64_t epoch, std::ostream& progress_out, bool interactive) {
  const TrainMnistConfig& c = run.config;
  DataLoader& loader = *run.loader;
  const int64_t batches = batches_per_epoch(c, loader);
  Progress bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs), batches, c.batch_size,
               progress_out, interactive);
  EpochStats stats;
  for (int64_t b = 0; b < batches; ++b) {
    std::optional<Batch> batch = loader.next();
    if (!batch && b == 0) batch = loader.next();  // a restored loader first reports its old epoch's end
    if (!batch) break;
    const double loss = train_step(run, *batch);
    const int64_t images = batch->inputs.size(0);
    stats.loss_sum += loss * double(images);
    stats.images += images;
    bar.update(b + 1, stats.loss_sum / double(stats.images));
  }
  // Finish the loader's epoch so the next one starts fresh (a dry run stops early).
  while (loader.next()) {}
  bar.finish();
  stats.seconds = bar.elapsed_seconds();
  return stats;
}

// Mean cross-entropy and accuracy on the test set, in chunks of 1000 images.
Evaluation evaluate(Module& model, const TensorDataset& test, Device device) {
  autograd::NoGradGuard no_grad;
  model.eval();
  const int64_t n = test.size(), chunk = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    Tensor x = test.inputs().narrow(0, start, len).to(device);
    Tensor y = test.targets().narrow(0, start, len).to(device);
    Tensor logits = model(x);
    loss_sum += cross_entropy(logits, y, Reduction::sum).item();
    correct += int64_t(sum(eq(argmax(logits, 1), y).to(DType::i64)).item());
  }
  model.train();
  return {loss_sum / double(n), double(correct) / double(n)};
}

void print_epoch(const EpochRecord& rec, int64_t images, int epochs, std::ostream& out) {
  out << "epoch " << rec.epoch << "/" << epochs << "  train loss " << bench::fixed(rec.train_loss, 4)
      << "  test loss " << bench::fixed(rec.test_loss, 4) << "  test accuracy " << bench::fixed(100 * rec.test_accuracy, 2)
      << "%  time " << format_duration(rec.seconds) << " (" << bench::fixed(double(images) / rec.seconds, 0)
      << " img/s)" << std::endl;
}

// The state --resume needs to continue after `epochs_done` epochs.
TrainingCheckpoint make_checkpoint(const MnistRun& run, int64_t epochs_done) {
  TrainingCheckpoint ck;
  ck.model = run.model->state_dict();
  ck.optimizer = run.optimizer->state_dict();
  if (run.schedule) ck.scheduler = run.schedule->state_dict();
  ck.epoch = epochs_done;
  ck.step = run.step;
  ck.config = run.config.to_json().dump();
  ck.rng["default"] = rng_state(default_generator());
  const DataLoaderState ls = run.loader->state();
  ck.rng["loader"] = {ls.seed, ls.offset};
  ck.counters["loader.epoch"] = ls.epoch;
  ck.counters["loader.batch"] = ls.batch;
  return ck;
}

// After every epoch: the checkpoint (--save), the CSV (--log) and the SVG (--plot) asked for.
void write_epoch_outputs(const MnistRun& run, int64_t epochs_done, const RunLog& log) {
  const TrainMnistConfig& c = run.config;
  if (!c.save.empty()) save_checkpoint(c.save, make_checkpoint(run, epochs_done));
  if (!c.log.empty()) log.write_csv(c.log);
  if (!c.plot.empty()) log.write_svg(c.plot, model_title(c));
}

}  // namespace

TrainMnistResult train_mnist(const TrainMnistConfig& given, std::ostream& out, std::ostream& progress_out,
                             bool interactive) {
  std::optional<TrainingCheckpoint> resumed;
  if (!given.resume.empty()) resumed = load_checkpoint(given.resume);
  const TrainMnistConfig c = resumed ? config_for_resume(given, *resumed) : given;
  check_config(c);
  MnistRun run = start_run(c);
  if (resumed) restore_run(run, *resumed, out);
  print_run_header(run, out);

  TrainMnistResult result;
  RunLog log;  // the epochs this process trains
  for (int64_t epoch = run.start_epoch, end = end_epoch(c); epoch < end; ++epoch) {
    const EpochStats stats = train_epoch(run, epoch, progress_out, interactive);
    const Evaluation ev = evaluate(*run.model, *run.test_data, run.device);
    const EpochRecord rec{.epoch = int(epoch + 1), .train_loss = stats.loss_sum / double(std::max<int64_t>(stats.images, 1)),
                          .test_loss = ev.loss, .test_accuracy = ev.accuracy, .seconds = stats.seconds,
                          .lr = run.optimizer->lr()};
    log.add(rec);
    print_epoch(rec, stats.images, c.epochs, out);
    result.test_accuracy = ev.accuracy;
    result.test_loss = ev.loss;
    result.seconds += rec.seconds;
    write_epoch_outputs(run, epoch + 1, log);
  }
  if (!c.save.empty()) out << "checkpoint: " << c.save << "\n";
  return result;
}

}  // namespace ember::apps
