// Basic layers: Linear, the activations ReLU, Sigmoid and Tanh, Flatten, Identity.
//
//   auto fc = std::make_shared<Linear>(784, 10);   // weight (10, 784), bias (10)
//   Tensor y = (*fc)(x);                            // x (N, 784) -> y (N, 10)
//   Tensor z = Flatten()(images);                   // (N, 1, 28, 28) -> (N, 784)
#pragma once

#include "core/rng.h"
#include "nn/module.h"

namespace ember {

// y = x W^T + b. x: (..., in_features) -> y: (..., out_features).
// Init as PyTorch: W ~ kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and
// b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  bool fuses_activation() const override { return true; }
  Tensor forward_activated(const Tensor& x, Activation act) override;
  // N*in*out for an output (N..., out) (Note [Counting MACs] in nn/module.h).
  int64_t macs(const Shape& output_shape) const override { return numel_of(output_shape) * in_features_; }
  void reset_parameters(Generator* gen = nullptr);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }  // undefined without bias

 private:
  int64_t in_features_, out_features_;
  Tensor weight_, bias_;
};

// A module that is one activation; Sequential fuses it into a Linear or Conv2d before it.
class ActivationModule : public Module {
 public:
  ActivationModule(std::string type_name, Activation act) : Module(std::move(type_name)), act_(act) {}
  Tensor forward(const Tensor& x) override { return activate(x, act_); }
  std::optional<Activation> as_activation() const override { return act_; }

 private:
  Activation act_;
};

class ReLU : public ActivationModule {
 public:
  ReLU() : ActivationModule("ReLU", Activation::relu) {}
};
class Sigmoid : public ActivationModule {
 public:
  Sigmoid() : ActivationModule("Sigmoid", Activation::sigmoid) {}
};
class Tanh : public ActivationModule {
 public:
  Tanh() : ActivationModule("Tanh", Activation::tanh) {}
};

// Merges dims start_dim..end_dim into one (default: everything after the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t start_dim_, end_dim_;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

}  // namespace ember
