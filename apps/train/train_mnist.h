// `ember train mnist`: trains an MNIST / Fashion-MNIST classifier end to end and reports train
// loss, test loss, test accuracy and time per epoch; optionally writes a CSV log, an SVG of the
// curves and a training checkpoint that --resume continues bitwise identically (on the CPU).
//
//   TrainMnistConfig c;            // defaults: mnist_cnn, 5 epochs, SGD momentum 0.9, cosine lr
//   c.data = "data/mnist";
//   TrainMnistResult r = train_mnist(c, std::cout, std::cerr, Progress::stderr_is_terminal());
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "core/json.h"

namespace ember::apps {

struct TrainMnistConfig {
  std::string data = "data/mnist";
  std::string dataset = "mnist";   // mnist | fashion-mnist (the same IDX layout)
  std::string model = "mnist_cnn"; // mnist_cnn | lenet5 | mlp
  int epochs = 5;                  // with --resume: 0 keeps the checkpoint's value
  int64_t batch_size = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::string optimizer = "sgd";   // sgd | adam | adamw
  double weight_decay = 0.0;
  std::string schedule = "cosine"; // cosine (per step, to 0 at the last step) | none
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string save;                // checkpoint written after every epoch
  std::string resume;              // checkpoint to continue from
  std::string log;                 // CSV, one row per epoch
  std::string plot;                // SVG of the curves
  int64_t max_batches = 0;         // > 0: stop each epoch after this many batches (--dry-run)
  int stop_after = 0;              // > 0: stop after this many epochs of the run (resume later)

  Json to_json() const;
  // Reads the fields a checkpoint stored (unknown keys are an error naming them).
  static TrainMnistConfig from_json(const Json& json);
};

struct TrainMnistResult {
  double test_accuracy = 0;
  double test_loss = 0;
  double seconds = 0;
};

// Results go to `out`; a progress bar per epoch goes to `progress` when `interactive` (see
// Progress in apps/train/progress.h).
TrainMnistResult train_mnist(const TrainMnistConfig& config, std::ostream& out, std::ostream& progress,
                             bool interactive);

}  // namespace ember::apps
