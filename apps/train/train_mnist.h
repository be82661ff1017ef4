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

#include "apps/train/training_options.h"
#include "core/json.h"

namespace ember::apps {

// The shared options (data, recipe, run control, outputs: training_options.h) and the model.
struct TrainMnistConfig : TrainingOptions {
  std::string model = "mnist_cnn"; // mnist_cnn | lenet5 | mlp

  Json to_json() const;
  // Reads the fields a checkpoint stored (unknown keys are an error naming them).
  static TrainMnistConfig from_json(const Json& json, const std::string& where = "config");
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
