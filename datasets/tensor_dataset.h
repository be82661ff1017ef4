// In-memory data sets: N samples stored as rows of an inputs tensor and a targets tensor.
//
//   TensorDataset data(images, labels);            // images (N, 1, 28, 28) f32, labels (N) i64
//   MnistDataset train("/work/data/mnist", /*train=*/true);   // normalised as torchvision does
//   DataLoader loader(std::make_shared<MnistDataset>(std::move(train)), {.batch_size = 64});
#pragma once

#include <string>

#include "core/tensor.h"
#include "datasets/dataset.h"
#include "datasets/mnist.h"

namespace ember {

// get(i) returns views of row i (no copy); the rng is not used.
class TensorDataset : public Dataset {
 public:
  // Both CPU and contiguous with the same size along dim 0 (copied to contiguous if needed).
  TensorDataset(Tensor inputs, Tensor targets);

  int64_t size() const override { return inputs_.size(0); }
  Sample get(int64_t index, Generator& rng) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_, targets_;
};

struct MnistNormalization {
  double mean = 0.1307;  // of the training pixels scaled to [0, 1]
  double std = 0.3081;
};

// Images (N, 1, 28, 28) f32 with (pixel / 255 - mean) / std, labels (N) i64.
class MnistDataset : public TensorDataset {
 public:
  MnistDataset(const std::string& dir, bool train, MnistNormalization norm = {});
  explicit MnistDataset(const MnistSplit& split, MnistNormalization norm = {});
};

}  // namespace ember
