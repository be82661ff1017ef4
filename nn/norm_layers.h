// Batch normalisation and dropout layers; both behave differently in train() and eval().
//
//   auto bn = std::make_shared<BatchNorm2d>(16);   // weight 1, bias 0, running mean 0 / var 1
//   Tensor y = (*bn)(x);                           // training: batch stats, updates the running ones
//   bn->eval();  Tensor z = (*bn)(x);              // evaluation: running stats
#pragma once

#include "core/rng.h"
#include "nn/module.h"

namespace ember {

// Over the channels of (N, C) (BatchNorm1d) or (N, C, H, W) (BatchNorm2d) inputs. Buffers:
// running_mean, running_var, num_batches_tracked (as PyTorch, so state dicts line up).
class BatchNorm : public Module {
 public:
  BatchNorm(const char* type_name, int64_t expected_rank, int64_t channels, double eps, double momentum, bool affine);
  Tensor forward(const Tensor& x) override;
  bool fuses_activation() const override { return true; }
  Tensor forward_activated(const Tensor& x, Activation act) override;
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }

 private:
  int64_t expected_rank_, channels_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNorm("BatchNorm1d", 2, channels, eps, momentum, affine) {}
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : BatchNorm("BatchNorm2d", 4, channels, eps, momentum, affine) {}
};

// Zeroes each element with probability p while training (scaling the rest by 1 / (1 - p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
  Generator* gen_;
};

}  // namespace ember
