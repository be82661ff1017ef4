// `ember train seresnext`: train_seresnext() at the bottom reads as the table of contents of a
// run; the helpers above it come in the order it calls them. The loop, optimizer and checkpoint
// state are shared with the other train commands (training_loop.h); the recipe's notes are in
// train_seresnext.h.
#include "apps/train/train_seresnext.h"
#include "ops/autocast.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/data_parallel.h"
#include "apps/train/mixup.h"
#include "apps/train/run_log.h"
#include "apps/train/training_loop.h"
#include "datasets/image_folder.h"
#include "ember.h"
#include "nn/models/zoo.h"

namespace ember::apps {

std::unique_ptr<LrScheduler> make_seresnext_schedule(const TrainSeresnextConfig& c, Optimizer& optimizer,
                                                     int64_t steps_per_epoch) {
  if (c.schedule != "cosine") return nullptr;
  const int64_t unit = c.schedule_unit == "step" ? steps_per_epoch : 1;
  return std::make_unique<CosineWithWarmup>(optimizer, c.resolved_warmup_epochs() * unit, int64_t(c.epochs) * unit);
}

double accumulate_gradients(int64_t rows, int64_t micro,
                            const std::function<Tensor(int64_t start, int64_t length)>& loss_of,
                            distributed::DistributedDataParallel* ddp, const GradScaler* scaler) {
  double loss = 0;
  for (int64_t start = 0; start < rows; start += micro) {
    const int64_t length = std::min(micro, rows - start);
    Tensor part = mul(loss_of(start, length), double(length) / double(rows));
    const Tensor scaled = scaler ? scaler->scale(part) : part;
    const AutocastGuard autocast_off(DType::f32);  // Note [Mixed-precision steps] in training_loop.h
    if (ddp && start + length < rows) {
      const auto local = ddp->no_sync();  // the last micro-batch synchronises them all
      scaled.backward();
    } else {
      scaled.backward();
    }
    loss += part.item();
  }
  return loss;
}

int64_t topk_correct(const Tensor& logits, const Tensor& targets, int64_t k) {
  const Tensor target_logit = gather(logits, 1, targets.unsqueeze(1));             // (N, 1)
  const Tensor above = sum(gt(logits, target_logit).to(DType::i64), {1});          // (N)
  return int64_t(sum(lt(above, double(k)).to(DType::i64)).item());
}

namespace {

// Everything a run holds between epochs.
struct SeresnextRun {
  TrainSeresnextConfig config;
  const ModelEntry* entry = nullptr;
  int64_t image_size = 0;
  std::shared_ptr<ImageFolder> train_data, val_data;
  DataParallelRun parallel{nullptr};  // Note [Training under mpirun]
  std::shared_ptr<Module> model;      // what is evaluated and saved
  std::shared_ptr<Module> trained;    // what the steps run: model, or its DistributedDataParallel
  TrainingState state;
};

struct Evaluation {
  double loss = 0, top1 = 0, top5 = 0;
};

std::string model_title(const SeresnextRun& run) { return run.config.model + " on " + run.config.data; }

TrainSeresnextConfig config_for_resume(const TrainSeresnextConfig& given, const TrainingCheckpoint& resumed) {
  const std::string where = "checkpoint '" + given.resume + "' config";
  TrainSeresnextConfig c = TrainSeresnextConfig::from_json(Json::parse(resumed.config, where), where);
  check_resume_conflicts(c.to_json(), given.to_json(), given.explicit_keys, "train seresnext");
  c.take_run_control(given);
  c.workers = given.workers;
  c.prefetch = given.prefetch;
  return c;
}

// Note [Small-image transforms]: the ImageNet members' defaults are NVIDIA's.
bool small_member(const ModelEntry& entry) { return entry.image_size < 224; }

// The two image folders with the recipe's transforms; the classes are the train folder's.
void load_data(SeresnextRun& run) {
  const TrainSeresnextConfig& c = run.config;
  const bool small = small_member(*run.entry);
  TrainTransformOptions train;
  train.size = run.image_size;
  train.crop.scale_min = c.crop_scale > 0 ? c.crop_scale : small ? 0.35 : 0.08;
  const int64_t resize = small ? run.image_size : int64_t(std::lround(double(run.image_size) / 0.875));
  EvalTransformOptions eval;
  eval.resize = resize;
  eval.crop = run.image_size;
  ImageFolderOptions options;
  options.bad_images = parse_bad_images(c.bad_images);
  options.transform = train_transform(train);
  run.train_data = std::make_shared<ImageFolder>(c.data + "/train", options);
  options.transform = eval_transform(eval);
  run.val_data = std::make_shared<ImageFolder>(c.data + "/val", options);
  EMBER_CHECK(run.val_data->classes() == run.train_data->classes(), "train seresnext: ", c.data,
              "/val has other classes than ", c.data, "/train");
}

// Workers and prefetch are run control: the batches do not depend on them (Note [Per-sample
// randomness] in datasets/data_loader.h).
DataLoaderOptions loader_options(const TrainSeresnextConfig& c, int64_t batch_size, bool shuffle, uint64_t seed,
                                 std::shared_ptr<const Sampler> sampler) {
  DataLoaderOptions options;
  options.sampler = std::move(sampler);
  options.batch_size = batch_size;
  options.shuffle = shuffle;
  options.drop_last = false;
  options.seed = seed;
  options.workers = c.workers;
  options.prefetch = c.resolved_prefetch();
  return options;
}

std::shared_ptr<Module> build_model(const SeresnextRun& run) {
  const int64_t classes = int64_t(run.train_data->classes().size());
  if (run.config.model == "se_resnext_cifar") return se_resnext_cifar(classes, run.config.depth, run.config.width);
  return run.entry->build(classes, nullptr);
}

// Seeds the run, loads the data and builds the model, optimizer, loader and schedule. The seed is
// set first so that it alone decides the initial weights; the loader shuffles with seed + 1.
SeresnextRun start_run(const TrainSeresnextConfig& c) {
  SeresnextRun run;
  run.config = c;
  run.entry = &find_model(c.model);
  EMBER_CHECK(run.entry->channels == 3 && run.entry->any_image_size, "train seresnext: '", c.model,
              "' is not a member of the ResNet family");
  run.image_size = c.image_size > 0 ? c.image_size : run.entry->image_size;
  run.state.device = training_device(c.device);
  run.parallel = DataParallelRun(c.group);
  manual_seed(c.seed);
  load_data(run);
  run.model = build_model(run);
  run.model->to(run.state.device);
  if (c.sync_bn && run.parallel.distributed()) distributed::convert_sync_batchnorm(*run.model, c.group);
  run.trained = run.parallel.replicate(run.model);  // rank 0's weights on every rank
  auto [decay, no_decay] = split_weight_decay(*run.model);
  TrainingOptions scaled = c;
  scaled.lr = c.applied_lr();
  run.state.optimizer = make_optimizer(scaled, std::move(decay), std::move(no_decay));
  run.state.set_precision(c.precision);
  run.state.loader = std::make_unique<DataLoader>(
      run.train_data,
      loader_options(c, c.step_batch(), true, c.seed + 1, run.parallel.sampler(run.train_data->size())));
  run.state.schedule = make_seresnext_schedule(c, *run.state.optimizer, batches_per_epoch(c, *run.state.loader));
  return run;
}

void restore_run(SeresnextRun& run, const TrainingCheckpoint& resumed, std::ostream& out) {
  run.model->load_state_dict(resumed.model);
  restore_training_state(run.state, resumed);
  out << resumed_message(run.config, run.state);
}

void print_run_header(const SeresnextRun& run, std::ostream& out) {
  const TrainSeresnextConfig& c = run.config;
  out << "train " << model_title(run) << ": " << run.train_data->size() << " train / " << run.val_data->size()
      << " val images, " << run.train_data->classes().size() << " classes, " << run.image_size << "x"
      << run.image_size << ", " << run.model->num_parameters() << " parameters\n"
      << "recipe: " << c.optimizer << " lr " << c.applied_lr() << " (" << c.lr << " per 256), momentum "
      << c.momentum << ", weight decay " << c.weight_decay << " (not on BN/bias), label smoothing "
      << c.label_smoothing << ", mixup " << c.mixup << ", " << c.schedule << " per " << c.schedule_unit
      << " with " << c.resolved_warmup_epochs() << " warmup epochs, batch " << c.batch_size << " x "
      << c.accumulation()
      << (run.parallel.distributed() ? " x " + std::to_string(run.parallel.world_size()) + " ranks" : "") << " = "
      << c.step_batch() * c.ranks << " per step" << (c.sync_bn && run.parallel.distributed() ? " (synchronised batch norm)" : "")
      << ", " << c.workers << " loader workers (prefetch " << c.resolved_prefetch() << "), "
      << num_threads() << " threads, device " << run.state.device << "\n";
}

// One optimizer step on a big batch (Note [Gradient accumulation]); returns its mean loss.
double train_step(SeresnextRun& run, const Batch& batch) {
  const TrainSeresnextConfig& c = run.config;
  Tensor x = batch.inputs.to(run.state.device), y = batch.targets.to(run.state.device);
  const MixedBatch mixed = mixup(x, y, c.mixup, default_generator());
  run.state.optimizer->zero_grad();
  const double loss = accumulate_gradients(x.size(0), c.batch_size, [&](int64_t start, int64_t length) {
    const MixedBatch part{mixed.inputs.narrow(0, start, length), mixed.targets.narrow(0, start, length),
                          mixed.targets_b.narrow(0, start, length), mixed.lambda};
    return mixed_cross_entropy((*run.trained)(part.inputs), part, c.label_smoothing);
  }, dynamic_cast<distributed::DistributedDataParallel*>(run.trained.get()), &run.state.scaler);
  run.state.scaler.step(*run.state.optimizer);  // skipped on Inf/NaN gradients (fp16)
  run.state.scaler.update();
  if (run.state.schedule && c.schedule_unit == "step") run.state.schedule->step();
  ++run.state.step;
  return loss;
}

// Mean cross-entropy (no smoothing), top-1 and top-5 over the validation folder (its first
// max_batches batches of 256 for --dry-run); under mpirun each rank scores its shard.
Evaluation evaluate(SeresnextRun& run) {
  run.parallel.sync_buffers(*run.trained);
  autograd::NoGradGuard no_grad;
  run.model->eval();
  DataLoader loader(run.val_data, loader_options(run.config, 256, false, 0,
                                                 run.parallel.evaluation_sampler(run.val_data->size())));
  const int64_t k = std::min<int64_t>(5, int64_t(run.val_data->classes().size()));
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0, n = 0;
  const int64_t batches = batches_per_epoch(run.config, loader);
  for (int64_t b = 0; b < batches; ++b) {
    std::optional<Batch> batch = loader.next();
    if (!batch) break;
    Tensor x = batch->inputs.to(run.state.device), y = batch->targets.to(run.state.device);
    Tensor logits = (*run.model)(x);
    loss_sum += cross_entropy(logits, y, Reduction::sum).item();
    top1 += topk_correct(logits, y, 1);
    top5 += topk_correct(logits, y, k);
    n += x.size(0);
  }
  run.model->train();
  std::vector<double> sums{loss_sum, double(top1), double(top5), double(n)};
  run.parallel.sum(sums);
  return {sums[0] / sums[3], sums[1] / sums[3], sums[2] / sums[3]};
}

void print_epoch(const EpochRecord& rec, const EpochStats& stats, int epochs, std::ostream& out) {
  out << "epoch " << rec.epoch << "/" << epochs << "  train loss " << bench::fixed(rec.train_loss, 4)
      << "  val loss " << bench::fixed(*rec.test_loss, 4) << "  top-1 " << bench::fixed(100 * rec.scores[0].second, 2)
      << "%  top-5 " << bench::fixed(100 * rec.scores[1].second, 2) << "%  lr " << rec.lr << "  "
      << epoch_time(stats) << std::endl;
}

TrainingCheckpoint make_checkpoint(const SeresnextRun& run, int64_t epochs_done) {
  TrainingCheckpoint ck = training_checkpoint(run.state, epochs_done);
  ck.model = run.model->state_dict();
  ck.config = run.config.to_json().dump();
  return ck;
}


}  // namespace

TrainSeresnextResult train_seresnext(const TrainSeresnextConfig& given, std::ostream& console,
                                     std::ostream& progress_console, bool interactive) {
  // Before any work: a bad --save should not cost an epoch. Rank 0 alone writes them.
  if (!given.group || given.group->rank() == 0) given.check_outputs("train seresnext");
  std::optional<TrainingCheckpoint> resumed;
  if (!given.resume.empty()) resumed = load_checkpoint(given.resume);
  RunLog log = run_log_so_far(resumed);  // the whole run's epochs, those before a resume too
  TrainSeresnextConfig c = resumed ? config_for_resume(given, *resumed) : given;
  const int world_size = c.group ? c.group->size() : 1;
  if (!resumed) c.ranks = world_size;
  const std::string refitted = c.fit_to_ranks(world_size, "train seresnext");  // Note [Batch size across rank counts]
  c.check();
  SeresnextRun run = start_run(c);
  std::ostream& out = run.parallel.leads() ? console : run.parallel.silent();
  std::ostream& progress_out = run.parallel.leads() ? progress_console : run.parallel.silent();
  if (resumed) restore_run(run, *resumed, out);
  if (!refitted.empty()) out << refitted << "\n";
  print_run_header(run, out);

  TrainingOptions bar = c;  // the progress bar counts optimizer steps of step_batch images
  bar.batch_size = c.step_batch();
  TrainSeresnextResult result;
  const InterruptGuard interrupt_guard;  // Note [Ctrl-C]
  for (int64_t epoch = run.state.start_epoch, end = end_epoch(c); epoch < end; ++epoch) {
    const double lr = run.state.optimizer->lr();  // the epoch's (per-epoch unit) or its first step's
    EpochStats stats = train_epoch(run.state, bar, epoch, progress_out, interactive,
                                   [&](const Batch& batch) { return train_step(run, batch); });
    if (stats.interrupted) stop_interrupted(run.state, c, epoch);
    sum_over_ranks(stats, run.parallel);
    if (run.state.schedule && c.schedule_unit == "epoch") run.state.schedule->step();
    const Evaluation ev = evaluate(run);
    const EpochRecord rec{.epoch = int(epoch + 1), .train_loss = stats.mean_loss(), .test_loss = ev.loss,
                          .scores = {{"val_top1", ev.top1}, {"val_top5", ev.top5}}, .seconds = stats.seconds,
                          .lr = lr};
    log.add(rec);
    print_epoch(rec, stats, c.epochs, out);
    result = {ev.top1, ev.top5, ev.loss, result.seconds + rec.seconds};
    run.parallel.after_outputs(
        [&] { write_epoch_outputs(c, [&] { return make_checkpoint(run, epoch + 1); }, log, model_title(run)); });
  }
  if (!c.save.empty()) out << "checkpoint: " << c.save << "\n";
  return result;
}

}  // namespace ember::apps
