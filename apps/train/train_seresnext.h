// `ember train seresnext`: trains a member of the ResNet family (nn/models/zoo.h) on image
// folders DATA/train/<class>/* and DATA/val/<class>/* (as `ember data image-folder` writes them)
// with NVIDIA's ConvNets recipe, reporting train loss, val loss, top-1 and top-5 per epoch; the
// same CSV, SVG, checkpoints and bitwise --resume as `ember train mnist`.
//
//   TrainSeresnextConfig c;        // se_resnext_cifar, NVIDIA's recipe (below)
//   c.data = "/tmp/fashion-png";
//   c.epochs = 10;
//   TrainSeresnextResult r = train_seresnext(c, std::cout, std::cerr, Progress::stderr_is_terminal());
//
// Note [NVIDIA's recipe]: SGD momentum 0.875, lr 0.256 per 256 images (the applied lr is
// lr * images per optimizer step / 256), weight decay 6.103515625e-05 on conv and linear weights
// only (split_weight_decay: not on BN parameters or biases), label smoothing 0.1, linear warmup
// then cosine to 0, stepped once per epoch (NVIDIA's lr_cosine_policy; --schedule-unit step
// steps it per optimizer step instead), optional mixup (mixup.h). Warmup: NVIDIA uses 8 of 90
// epochs; a run of another length warms up for the same fraction, round(8 * epochs / 90) but at
// least 1 and less than the run, unless --warmup-epochs says otherwise.
//
// Note [Gradient accumulation]: --target-batch T makes every optimizer step see
// k = ceil(T / batch) micro-batches of --batch-size: the loader hands out k * batch images at a
// time (the shuffle is the big batch's), each micro-batch's forward and backward runs alone
// (peak memory of one micro-batch), and its loss is scaled by its share of the images, so the
// accumulated gradient is the big batch's mean. BatchNorm normalises each micro-batch with its
// own statistics, as on k GPUs. Mixup draws one lambda and one pairing per big batch.
//
// Note [Small-image transforms]: the ImageNet members train on RandomResizedCrop(size, scale
// (0.08, 1)) + flip and evaluate on Resize(size / 0.875) + CenterCrop(size), as NVIDIA does.
// The small member (se_resnext_cifar, 32x32) is fed 28x28 Fashion-MNIST upscaled: scale 0.08
// would often keep a crop of 8x8 source pixels, too little of a garment to name it, so its
// default --crop-scale is 0.35: the crop keeps at least a third of the image's area, between
// the ImageNet crop and the pad-4 random crop usual on CIFAR (which keeps >= 77% of the
// content); its evaluation resizes the whole image to the model's size (no center crop, which
// would cut the garment's edges off a 28x28 image).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "apps/train/training_options.h"
#include "core/json.h"
#include "core/tensor.h"
#include "nn/distributed/data_parallel.h"
#include "nn/grad_scaler.h"
#include "nn/module.h"
#include "nn/optim/lr_scheduler.h"

namespace ember::apps {

// The shared options (training_options.h: here lr is per 256 images) and the recipe's own.
struct TrainSeresnextConfig : TrainingOptions {
  TrainSeresnextConfig();

  std::string model = "se_resnext_cifar";  // any member of the ResNet family
  int64_t depth = 11, width = 32;          // se_resnext_cifar only
  int64_t image_size = 0;                  // 0: the model's (32 or 224)
  double crop_scale = 0;                   // RandomResizedCrop's smallest area; 0: the model's
  int warmup_epochs = -1;                  // -1: round(8 * epochs / 90), in [1, epochs)
  std::string schedule_unit = "epoch";     // epoch | step
  double label_smoothing = 0.1;
  double mixup = 0;                        // Beta(mixup, mixup); 0: off (NVIDIA's option: 0.2)
  int64_t target_batch = 0;                // > batch_size * ranks: accumulate micro-batches up to it
  bool sync_bn = false;                    // under mpirun: batch norm over all ranks' batches (sync_batch_norm.h)
  int workers = 2;                         // loader threads (run control: results do not depend on it)
  int prefetch = 0;                        // batches decoded ahead (run control); 0: resolved_prefetch()'s default
  std::string bad_images = "fail";         // fail | skip (Note [Bad images])

  Json to_json() const;
  // Reads the fields a checkpoint stored (unknown keys are an error naming them).
  static TrainSeresnextConfig from_json(const Json& json, const std::string& where = "config");
  void check() const;

  // Derived values of the recipe.
  int64_t accumulation() const;        // micro-batches per optimizer step
  int64_t step_batch() const;          // images per optimizer step on one rank
  double applied_lr() const;           // lr * step_batch * ranks / 256
  int resolved_warmup_epochs() const;  // warmup_epochs, or the default above
  // prefetch, or max(2, workers): Note [Prefetch] (datasets/data_loader.h) keeps every worker busy
  // only with prefetch >= workers, and 2 is DataLoader's own default.
  int resolved_prefetch() const;
};

struct TrainSeresnextResult {
  double top1 = 0, top5 = 0, val_loss = 0;
  double seconds = 0;
};

TrainSeresnextResult train_seresnext(const TrainSeresnextConfig& config, std::ostream& out, std::ostream& progress,
                                     bool interactive);

// Parts of the recipe, for tests.
// Warmup then cosine over the run in the configured unit (steps_per_epoch optimizer steps per
// epoch); null for --schedule none.
std::unique_ptr<LrScheduler> make_seresnext_schedule(const TrainSeresnextConfig& c, Optimizer& optimizer,
                                                     int64_t steps_per_epoch);
// Forward and backward of `inputs` in micro-batches of `micro` rows, each loss scaled by its
// share of the rows, so the gradients add up to those of loss_of(all rows) when loss_of is a
// mean (Note [Gradient accumulation]); returns that mean loss. With `ddp`, the micro-batches
// before the last accumulate locally (no_sync) and the last backward averages the sum over ranks.
// With `scaler` (fp16), each backward starts from the scaled loss; the returned loss is unscaled.
double accumulate_gradients(int64_t rows, int64_t micro,
                            const std::function<Tensor(int64_t start, int64_t length)>& loss_of,
                            distributed::DistributedDataParallel* ddp = nullptr, const GradScaler* scaler = nullptr);
// Rows of `logits` (N, C) whose target is among the k largest (ties counted against).
int64_t topk_correct(const Tensor& logits, const Tensor& targets, int64_t k);

}  // namespace ember::apps
