// The shared training loop (training_loop.h).
#include "apps/train/training_loop.h"

#include "ops/autocast.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>

#include "apps/bench/timing.h"
#include "apps/train/progress.h"
#include "autograd/graph.h"
#include "core/error.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"

namespace ember::apps {

std::unique_ptr<Optimizer> make_optimizer(const TrainingOptions& c, std::vector<Tensor> decay,
                                          std::vector<Tensor> no_decay) {
  if (c.optimizer == "sgd") {
    const SgdOptions with{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay};
    SgdOptions without = with;
    without.weight_decay = 0;
    return std::make_unique<SGD>(
        std::vector<ParamGroup<SgdOptions>>{{std::move(decay), with}, {std::move(no_decay), without}});
  }
  const AdamOptions with{.lr = c.lr, .weight_decay = c.weight_decay};
  AdamOptions without = with;
  without.weight_decay = 0;
  std::vector<ParamGroup<AdamOptions>> groups{{std::move(decay), with}, {std::move(no_decay), without}};
  if (c.optimizer == "adam") return std::make_unique<Adam>(std::move(groups));
  if (c.optimizer == "adamw") return std::make_unique<AdamW>(std::move(groups));
  EMBER_FAIL("unknown optimizer '", c.optimizer, "' (expected sgd, adam or adamw)");
}

void check_datasets(const TensorDataset& train, const TensorDataset& test, const TrainingOptions& c,
                    const std::string& command) {
  EMBER_CHECK(train.size() > 0, command, ": the training set in '", c.data, "' has no images");
  EMBER_CHECK(test.size() > 0, command, ": the test set in '", c.data, "' has no images (nothing to score)");
}

int64_t batches_per_epoch(const TrainingOptions& c, const DataLoader& loader) {
  return c.max_batches > 0 ? std::min(c.max_batches, loader.size()) : loader.size();
}

std::unique_ptr<LrScheduler> make_schedule(const TrainingOptions& c, Optimizer& optimizer, const DataLoader& loader) {
  if (c.schedule != "cosine") return nullptr;
  return std::make_unique<CosineWithWarmup>(optimizer, 0, batches_per_epoch(c, loader) * c.epochs);
}

int64_t end_epoch(const TrainingOptions& c) {
  return c.stop_after > 0 ? std::min<int64_t>(c.epochs, c.stop_after) : c.epochs;
}

void TrainingState::set_precision(const std::string& precision) {
  autocast = precision == "bf16" ? DType::bf16 : precision == "fp16" ? DType::f16 : DType::f32;
  scaler = GradScaler({.enabled = autocast == DType::f16});
}

double optimizer_step(TrainingState& state, const Tensor& loss) {
  const AutocastGuard autocast_off(DType::f32);  // Note [Mixed-precision steps]
  state.optimizer->zero_grad();
  state.scaler.scale(loss).backward();
  state.scaler.step(*state.optimizer);  // skipped on Inf/NaN gradients (fp16)
  state.scaler.update();
  if (state.schedule) state.schedule->step();
  ++state.step;
  return loss.item();
}

namespace {

// How a run that stops for non-finite values ends (Note [Non-finite loss]): this epoch's outputs
// are not written, so the last checkpoint stays the last good one.
std::string outputs_not_written(const TrainingOptions& c, int64_t epoch) {
  return detail::concat("The outputs of epoch ", epoch + 1, " were not written",
                        c.save.empty() ? "" : "; the last checkpoint is unchanged");
}

// One training step; in anomaly mode, its AnomalyError gains the epoch and step (Note
// [--detect-anomaly]).
double checked_step(const TrainingState& state, const TrainingOptions& c, int64_t epoch, int64_t b, int64_t batches,
                    const std::function<double(const Batch&)>& step, const Batch& batch) {
  try {
    return step(batch);
  } catch (const autograd::AnomalyError& e) {
    throw autograd::AnomalyError(detail::concat(e.what(), " (epoch ", epoch + 1, ", step ", state.step + 1, ", batch ",
                                                b + 1, " of ", batches, "). ", outputs_not_written(c, epoch)),
                                 e.file(), e.line());
  }
}

}  // namespace

EpochStats train_epoch(TrainingState& state, const TrainingOptions& c, int64_t epoch, std::ostream& progress,
                       bool interactive, const std::function<double(const Batch&)>& step) {
  // Note [--detect-anomaly]: the flag turns anomaly mode (autograd/graph.h) on for the training
  // steps only (not evaluation), in this one loop that every train command runs. Its error names
  // the op and is thrown mid-step, before the epoch's outputs, like a non-finite loss; `ember`
  // prints it and exits 1. A caller that enabled the mode itself keeps it.
  const autograd::DetectAnomalyGuard anomaly(c.detect_anomaly || autograd::is_anomaly_enabled());
  DataLoader& loader = *state.loader;
  const int64_t batches = batches_per_epoch(c, loader);
  Progress bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs), batches, c.batch_size, progress,
               interactive);
  EpochStats stats;
  for (int64_t b = 0; b < batches; ++b) {
    std::optional<Batch> batch = loader.next();
    if (!batch && b == 0) batch = loader.next();  // a restored loader first reports its old epoch's end
    if (!batch) break;
    double loss;
    {
      const AutocastGuard autocast(state.autocast);  // Note [Mixed-precision steps]
      loss = checked_step(state, c, epoch, b, batches, step, *batch);
    }
    // Note [Non-finite loss]: a NaN or infinite loss means the run has diverged; every later
    // epoch would print nan and --save would overwrite the last good checkpoint with it. The
    // run stops here, before this epoch's outputs are written.
    EMBER_CHECK(std::isfinite(loss), "training diverged: the loss is ", loss, " at epoch ", epoch + 1, ", step ",
                state.step, " (batch ", b + 1, " of ", batches, "); try a lower --lr (--detect-anomaly names the "
                "first op that produces NaN/Inf). ", outputs_not_written(c, epoch));
    const int64_t images = batch->inputs.size(0);
    stats.loss_sum += loss * double(images);
    stats.images += images;
    bar.update(b + 1, stats.mean_loss());
    if (InterruptGuard::requested()) {
      stats.interrupted = true;  // the command stops here (Note [Ctrl-C])
      break;
    }
  }
  // Finish the loader's epoch so the next one starts fresh (a dry run stops early).
  if (!stats.interrupted)
    while (loader.next()) {}
  bar.finish();
  stats.seconds = bar.elapsed_seconds();
  return stats;
}

namespace {

volatile sig_atomic_t interrupt_requested = 0;

extern "C" void on_sigint(int) { interrupt_requested = 1; }

struct sigaction previous_sigint;

}  // namespace

InterruptGuard::InterruptGuard() {
  interrupt_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  action.sa_flags = SA_RESETHAND;  // a second Ctrl-C is not caught
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_sigint);
}

InterruptGuard::~InterruptGuard() { sigaction(SIGINT, &previous_sigint, nullptr); }

bool InterruptGuard::requested() { return interrupt_requested != 0; }

void stop_interrupted(const TrainingState& state, const TrainingOptions& c, int64_t epoch) {
  const std::string resume =
      c.save.empty() ? std::string("; nothing was saved (no --save)")
      : epoch == 0   ? "; no epoch was completed, so '" + c.save + "' was not written"
                     : "; '" + c.save + "' holds epoch " + std::to_string(epoch) + " (continue with --resume " +
                         c.save + ")";
  throw Interrupted(detail::concat("interrupted in epoch ", epoch + 1, " after step ", state.step, resume), __FILE__,
                    __LINE__);
}

TrainingCheckpoint training_checkpoint(const TrainingState& state, int64_t epochs_done) {
  TrainingCheckpoint ck;
  ck.optimizer = state.optimizer->state_dict();
  if (state.schedule) ck.scheduler = state.schedule->state_dict();
  ck.epoch = epochs_done;
  ck.step = state.step;
  ck.rng["default"] = rng_state(default_generator());
  const DataLoaderState ls = state.loader->state();
  ck.rng["loader"] = {ls.seed, ls.offset};
  ck.counters["loader.epoch"] = ls.epoch;
  ck.counters["loader.batch"] = ls.batch;
  ck.grad_scaler = state.scaler.state_dict();  // empty unless fp16
  return ck;
}

void restore_training_state(TrainingState& state, const TrainingCheckpoint& resumed) {
  state.optimizer->load_state_dict(resumed.optimizer);
  if (state.schedule) state.schedule->load_state_dict(resumed.scheduler);
  restore_rng(default_generator(), checkpoint_rng(resumed, "default"));
  const RngState ls = checkpoint_rng(resumed, "loader");
  state.loader->set_state({ls.seed, ls.offset, checkpoint_counter(resumed, "loader.epoch"),
                           checkpoint_counter(resumed, "loader.batch")});
  state.start_epoch = resumed.epoch;
  state.step = resumed.step;
  if (!resumed.grad_scaler.empty()) state.scaler.load_state_dict(resumed.grad_scaler);
}

std::string resumed_message(const TrainingOptions& c, const TrainingState& state) {
  std::string message = "resumed " + c.resume + " at epoch " + std::to_string(state.start_epoch) + " (step " +
                        std::to_string(state.step) + ")\n";
  if (c.save.empty())
    message += "note: no --save given, so this run writes no checkpoint (outputs are not taken from the "
               "checkpoint; add --save " + c.resume + " to keep updating it)\n";
  return message;
}

RunLog run_log_so_far(const std::optional<TrainingCheckpoint>& resumed) {
  if (!resumed) return {};
  const std::string where = "checkpoint '" + resumed->source + "' history";
  RunLog log = RunLog::from_json(Json::parse(resumed->history, where), where);
  // Empty for a checkpoint from before the history was kept; else written with the checkpoint.
  EMBER_CHECK(log.records().empty() || log.records().back().epoch == resumed->epoch, where, ": its last epoch is ",
              log.records().empty() ? 0 : log.records().back().epoch, ", the checkpoint's ", resumed->epoch);
  return log;
}

void write_epoch_outputs(const TrainingOptions& c, const std::function<TrainingCheckpoint()>& checkpoint,
                         const RunLog& log, const std::string& title) {
  if (!c.save.empty()) {
    TrainingCheckpoint ck = checkpoint();
    ck.history = log.to_json().dump();
    save_checkpoint(c.save, ck);
  }
  if (!c.log.empty()) log.write_csv(c.log);
  if (!c.plot.empty()) log.write_svg(c.plot, title);
}

void sum_over_ranks(EpochStats& stats, const DataParallelRun& parallel) {
  if (!parallel.distributed()) return;
  std::vector<double> sums{stats.loss_sum, double(stats.images)};
  parallel.sum(sums);
  stats.loss_sum = sums[0];
  stats.images = int64_t(sums[1]);
}

std::string epoch_time(const EpochStats& stats) {
  return "time " + format_duration(stats.seconds) + " (" +
         bench::fixed(double(stats.images) / std::max(stats.seconds, 1e-9), 0) + " img/s)";
}

}  // namespace ember::apps
