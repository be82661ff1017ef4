// A convolution followed by batch norm and an activation, as the ResNet family writes them,
// run as one convolution in evaluation (Note [Folded batch norm]).
//
//   ConvBn conv_bn(conv, bn);                          // shares the two modules, registers nothing
//   Tensor y = conv_bn(x, relu_module, Activation::relu);   // relu(bn(conv(x)))
//   Tensor z = conv_bn(x);                                   // bn(conv(x))
#pragma once

#include <array>
#include <memory>
#include <mutex>

#include "nn/conv_layers.h"
#include "nn/norm_layers.h"
#include "ops/conv_weight_pack.h"
#include "core/tensor_stamp.h"

namespace ember {

// Note [Folded batch norm]: in eval mode batch norm is a per-channel affine map of the
// convolution's output, bn(conv(x)) = conv(x) * s + t with s = gamma / sqrt(running_var + eps) and
// t = beta - running_mean * s, so it folds into the convolution: weights w * s (per output
// channel), bias t (+ the convolution's own bias times s), the activation in the convolution's
// epilogue. That saves batch norm's four ops per layer (its eval-mode pass read and wrote every
// activation once more): batch-1 se_resnext50_32x4d inferences on a Zen 5 (2 threads, median of 20
// calls, three alternated runs of each build) took 39.5-40.6 ms unfolded and 34.6-37.6 ms folded.
// The fold happens only in eval mode (both modules) under NoGradGuard: with gradients on, the
// folded weights would cut the path to the convolution's weight and to gamma and beta. The folded
// tensors are kept and rebuilt only when a source (weight, bias, gamma, beta, running mean and
// variance) changed: a new storage (to(), to(dtype)) or a new version (every in-place op, optimizer
// step and load_state_dict bumps it; code writing through data<T>() must call bump_version(), as
// autograd already requires). Folding rounds w * s once, so results differ from the unfused modules
// by a few ulps. Threads sharing a model in eval mode share the folded tensors: a mutex guards
// their refresh. A call that does not fold (training) drops them, so a model trained between
// evaluations does not carry a second copy of its convolution weights. The folded weight also stays
// packed for the CPU GEMM between calls (a Conv2dWeightPack, Note [Conv weight packs] in
// ops/cpu/conv.cpp): evaluation holds up to two more copies of the convolution weights.
class ConvBn {
 public:
  ConvBn(std::shared_ptr<Conv2d> conv, std::shared_ptr<BatchNorm> bn);
  // act(bn(conv(x))); `activation_module` (may be null) is the module summary() shows for `act`.
  Tensor operator()(const Tensor& x, Module* activation_module = nullptr, Activation act = Activation::none);
  // Whether the next call on this thread folds (eval mode, no gradients).
  bool folds() const;

 private:
  struct Fold {
    Tensor weight, bias;
    std::shared_ptr<Conv2dWeightPack> pack;  // the folded weight, packed by its first forward
  };
  // The folded weight and bias, refreshed first if a source changed.
  Fold folded();
  void release_fold();

  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm> bn_;
  std::mutex mutex_;  // guards the two below
  Fold fold_;
  std::array<TensorStamp, 6> stamps_;  // of the sources the folded tensors came from
};

}  // namespace ember
