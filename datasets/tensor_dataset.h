// In-memory data sets: N samples stored as rows of an inputs tensor and a targets tensor.
//
//   TensorDataset data(images, labels);            // images (N, 1, 28, 28) f32, labels (N) i64
//   MnistDataset train("/work/data/mnist", /*train=*/true);   // normalised as torchvision does
//   DataLoader loader(std::make_shared<MnistDataset>(std::move(train)), {.batch_size = 64});
#pragma once

#include <string>

#include "core/tensor.h"
#include "datasets/mnist.h"

namespace ember {

class TensorDataset {
 public:
  // Both CPU and contiguous with the same size along dim 0 (copied to contiguous if needed).
  TensorDataset(Tensor inputs, Tensor targets);
  virtual ~TensorDataset() = default;

  int64_t size() const { return inputs_.size(0); }
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
