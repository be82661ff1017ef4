// The parts of a training run that every `ember train` command shares: the optimizer and
// schedule a TrainingOptions asks for, the epoch loop with its progress bar, one optimizer
// step, and the checkpoint state that makes --resume bitwise (on the CPU). A command supplies
// the model, the data and the loss; see train_mnist.cpp and train_metric.cpp.
//
//   TrainingState state;
//   state.optimizer = make_optimizer(c, decay, no_decay);
//   state.loader = std::make_unique<DataLoader>(train_data, loader_options);
//   state.schedule = make_schedule(c, *state.optimizer, *state.loader);
//   if (resumed) restore_training_state(state, *resumed);
//   for (int64_t epoch = state.start_epoch; epoch < end_epoch(c); ++epoch) {
//     EpochStats s = train_epoch(state, c, epoch, std::cerr, interactive, [&](const Batch& b) {
//       return optimizer_step(state, loss_of(b));
//     });
//     TrainingCheckpoint ck = training_checkpoint(state, epoch + 1);   // + ck.model, ck.config
//   }
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/train/data_parallel.h"
#include "apps/train/run_log.h"
#include "apps/train/training_options.h"
#include "core/error.h"
#include "datasets/data_loader.h"
#include "datasets/tensor_dataset.h"
#include "nn/checkpoint.h"
#include "nn/grad_scaler.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"

namespace ember::apps {

// What every run holds between epochs, besides its model and data.
struct TrainingState {
  Device device;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<LrScheduler> schedule;  // null for --schedule none
  int64_t start_epoch = 0;
  int64_t step = 0;  // optimizer steps taken, over all epochs
  DType autocast = DType::f32;            // --precision: the forward's autocast dtype (f32: off)
  GradScaler scaler{{.enabled = false}};  // on for fp16 (Note [Mixed-precision steps])

  // Sets autocast and the scaler from --precision (fp32, bf16, fp16); before a resume restores them.
  void set_precision(const std::string& precision);
};

// Note [Mixed-precision steps]: --precision bf16 or fp16 runs each training step's forward under
// an AutocastGuard (ops/autocast.h, Note [Autocast policy]): convolutions, linear layers and
// matmuls in the low dtype, losses and normalisation in f32, parameters and optimizer state f32.
// The backward and the optimizer step run with autocast off (as PyTorch recommends: the
// backward follows the dtypes its forward recorded). fp16 adds dynamic loss scaling
// (nn/grad_scaler.h, PyTorch's GradScaler defaults): the loss is scaled before backward, the
// gradients are unscaled before the step, a step with Inf/NaN gradients is skipped and the
// scale backs off; its state is saved in checkpoints, so a resume stays bitwise. bf16 has f32's
// exponent range and needs no scaling. Evaluation runs in f32.

struct EpochStats {
  double loss_sum = 0;  // batch losses weighted by batch size
  int64_t images = 0;
  double seconds = 0;
  bool interrupted = false;  // Ctrl-C: the epoch stopped after a step (Note [Ctrl-C])
  double mean_loss() const { return images > 0 ? loss_sum / double(images) : 0.0; }
};

// c.optimizer over two groups: `decay` with c.weight_decay, `no_decay` without.
std::unique_ptr<Optimizer> make_optimizer(const TrainingOptions& c, std::vector<Tensor> decay,
                                          std::vector<Tensor> no_decay);
// Neither split may be empty (an empty test set would score 0/0); errors name `command` and c.data.
void check_datasets(const TensorDataset& train, const TensorDataset& test, const TrainingOptions& c,
                    const std::string& command);
// Batches per epoch: the loader's, or the first max_batches of it (--dry-run).
int64_t batches_per_epoch(const TrainingOptions& c, const DataLoader& loader);
// The cosine schedule over the whole run as configured (a resumed run continues the same
// curve), or null for "none".
std::unique_ptr<LrScheduler> make_schedule(const TrainingOptions& c, Optimizer& optimizer, const DataLoader& loader);
// The epoch after the last one this process trains: --stop-after ends the run early.
int64_t end_epoch(const TrainingOptions& c);

// Backward from `loss` (scaled for fp16), one optimizer and schedule step; returns the loss as a
// number (the one host synchronisation per step, for display).
double optimizer_step(TrainingState& state, const Tensor& loss);

// One pass over the loader (or its first max_batches) with a progress bar; `step` trains on a
// batch and returns its mean loss. A non-finite loss is an Error naming the epoch and step
// (Note [Non-finite loss]).
EpochStats train_epoch(TrainingState& state, const TrainingOptions& c, int64_t epoch, std::ostream& progress,
                       bool interactive, const std::function<double(const Batch&)>& step);

// Note [Ctrl-C]: while a run holds an InterruptGuard, SIGINT only sets a flag; train_epoch
// checks it after every step and ends the epoch there (EpochStats::interrupted); the command
// throws Interrupted, which `ember` turns into exit status 130. The resume point is the
// checkpoint --save wrote at the end of the last completed epoch: the partial epoch is not
// saved, because the loader can restore its shuffle order only at an epoch boundary
// (DataLoader::set_state), so a mid-epoch checkpoint would not resume bitwise. A second
// Ctrl-C before the step ends kills the process as usual (the handler resets itself).
class InterruptGuard {
 public:
  InterruptGuard();   // installs the handler, clears the flag
  ~InterruptGuard();  // restores the previous handler
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool requested();
};

class Interrupted : public Error {
 public:
  using Error::Error;
};

// After an interrupted epoch: throws Interrupted, naming the step and the resume point.
[[noreturn]] void stop_interrupted(const TrainingState& state, const TrainingOptions& c, int64_t epoch);

// The optimizer, schedule, generators, loader position and counts of a run after
// `epochs_done` epochs; the caller adds the model and the config.
TrainingCheckpoint training_checkpoint(const TrainingState& state, int64_t epochs_done);
// Puts those back, so the rest of the run is bitwise identical to an uninterrupted one.
void restore_training_state(TrainingState& state, const TrainingCheckpoint& resumed);

// What a resumed run prints first: where it resumed, and that it writes no checkpoint when
// --save was not given again (outputs come from the command line, not from the checkpoint).
std::string resumed_message(const TrainingOptions& c, const TrainingState& state);

// The run's epoch records so far: none for a new run; for a resumed one, those its checkpoint
// kept (TrainingCheckpoint::history, ending at the checkpoint's epoch; empty in checkpoints from
// before it was kept), so that the CSV and the curves of a run stopped and resumed cover all of
// it. A malformed history is an Error naming the file: call it before any work.
RunLog run_log_so_far(const std::optional<TrainingCheckpoint>& resumed);

// After every epoch: the checkpoint (c.save, built by `checkpoint` only when asked for, with
// `log` as its history), the CSV (c.log) and the SVG titled `title` (c.plot).
void write_epoch_outputs(const TrainingOptions& c, const std::function<TrainingCheckpoint()>& checkpoint,
                         const RunLog& log, const std::string& title);

// Under mpirun: the epoch's loss sum and images over all ranks (so mean_loss() and the img/s of
// epoch_time are the job's); the time stays this rank's. Nothing for one process.
void sum_over_ranks(EpochStats& stats, const DataParallelRun& parallel);

// "time 12.3s (5000 img/s)" for an epoch's line.
std::string epoch_time(const EpochStats& stats);

}  // namespace ember::apps
