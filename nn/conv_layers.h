// Convolution and pooling layers (NCHW).
//
//   auto conv = std::make_shared<Conv2d>(Conv2dOptions{.in = 1, .out = 16, .kernel = 3, .padding = 1});
//   Tensor y = (*conv)(images);                         // (N, 1, 28, 28) -> (N, 16, 28, 28)
//   Tensor p = MaxPool2d(2)(y);                         // -> (N, 16, 14, 14)
//   Tensor g = AdaptiveAvgPool2d(1)(p);                 // -> (N, 16, 1, 1)
#pragma once

#include <optional>

#include "core/rng.h"
#include "nn/module.h"
#include "ops/conv_geometry.h"

namespace ember {

struct Conv2dOptions {
  int64_t in = 1, out = 1;
  IntPair kernel = 3;
  IntPair stride = 1;
  IntPair padding = 0;
  IntPair dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// weight (out, in / groups, kH, kW), bias (out). PyTorch's init: kaiming_uniform(a = sqrt(5))
// for the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
class Conv2d : public Module {
 public:
  explicit Conv2d(Conv2dOptions options, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  bool fuses_activation() const override { return true; }
  Tensor forward_activated(const Tensor& x, Activation act) override;
  bool fuses_activation_and_pool() const override { return true; }
  Tensor forward_activated_pooled(const Tensor& x, Activation act, const MaxPoolArgs& pool) override;
  // N*Cout*Ho*Wo * (Cin/groups)*kH*kW (Note [Counting MACs] in nn/module.h).
  int64_t macs(const Shape& output_shape) const override;
  void reset_parameters(Generator* gen = nullptr);
  const Conv2dOptions& options() const { return options_; }
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntPair kernel, std::optional<IntPair> stride = {}, IntPair padding = 0)
      : Module("MaxPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& x) override;
  std::optional<MaxPoolArgs> as_max_pool() const override { return MaxPoolArgs{kernel_, stride_, padding_}; }

 private:
  IntPair kernel_;
  std::optional<IntPair> stride_;
  IntPair padding_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntPair kernel, std::optional<IntPair> stride = {}, IntPair padding = 0)
      : Module("AvgPool2d"), kernel_(kernel), stride_(stride), padding_(padding) {}
  Tensor forward(const Tensor& x) override;

 private:
  IntPair kernel_;
  std::optional<IntPair> stride_;
  IntPair padding_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntPair output_size) : Module("AdaptiveAvgPool2d"), output_size_(output_size) {}
  Tensor forward(const Tensor& x) override;

 private:
  IntPair output_size_;
};

}  // namespace ember
