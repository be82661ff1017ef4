// A convolution followed by batch norm and an activation, as the ResNet family writes them,
// run as one convolution in evaluation (Note [Folded batch norm]).
//
//   ConvBn conv_bn(conv, bn);                         // shares the two modules, registers nothing
//   Tensor y = conv_bn(x, *relu, Activation::relu);   // relu(bn(conv(x))), `relu` the ReLU module
//   Tensor z = conv_bn(x);                            // bn(conv(x))
#pragma once

#include <array>
#include <memory>
#include <mutex>

#include "core/tensor_stamp.h"
#include "nn/conv_layers.h"
#include "nn/norm_layers.h"
#include "ops/conv_weight_pack.h"

namespace ember {

// Note [Folded batch norm]: in eval mode batch norm is a per-channel affine map of the
// convolution's output, bn(conv(x)) = conv(x) * s + t with s = gamma / sqrt(running_var + eps) and
// t = beta - running_mean * s, so it folds into the convolution: weights w * s (per output
// channel), bias t (+ the convolution's own bias times s), the activation in the convolution's
// epilogue. That saves batch norm's four ops per layer (its eval-mode pass read and wrote every
// activation once more): batch-1 se_resnext50_32x4d inferences on a Zen 5 (2 threads, median of 20
// calls, three alternated runs of each build) took 39.5-40.6 ms unfolded and 34.6-37.6 ms folded.
// The fold happens only in eval mode (both modules) under NoGradGuard and without autocast: with
// gradients on, the folded weights would cut the path to the convolution's weight and to gamma and
// beta, and under autocast batch norm may widen its output (on CUDA it returns f32 for a bf16
// convolution), which a folded convolution would not. The folded tensors are kept and rebuilt only
// when a source (weight, bias, gamma, beta, running mean and variance) changed: a new storage
// (to(), to(dtype)) or a new version (every in-place op, optimizer step and load_state_dict bumps
// it; code writing through data<T>() must call bump_version(), as autograd already requires). The
// fold is computed in f32 (f64 for f64 weights) and rounded once to the weights' dtype, so results
// differ from the unfused modules by a few ulps of that dtype. Threads sharing a model in eval mode
// share the folded tensors: a mutex guards their refresh. A call in training mode drops them, so a
// model trained between evaluations does not carry a second copy of its convolution weights. The
// folded weight also stays packed for the CPU GEMM between calls (a Conv2dWeightPack, Note [Conv
// weight packs] in ops/cpu/conv.cpp): evaluation holds up to two more copies of the convolution
// weights.
class ConvBn {
 public:
  ConvBn(std::shared_ptr<Conv2d> conv, std::shared_ptr<BatchNorm2d> bn);
  // x (N, Cin, H, W) -> bn(conv(x)) (N, Cout, Ho, Wo).
  Tensor operator()(const Tensor& x);
  // x (N, Cin, H, W) -> act(bn(conv(x))) (N, Cout, Ho, Wo); `activation_module` is the module
  // summary() shows for `act`.
  Tensor operator()(const Tensor& x, Module& activation_module, Activation act);
  // Whether a call on this thread folds now: eval mode, no gradients, no autocast.
  bool folds() const;
  // How many times the folded tensors were built (for tests).
  int64_t folds_built() const;

 private:
  struct Fold {
    Tensor weight, bias;
    std::shared_ptr<Conv2dWeightPack> pack;  // the folded weight, packed by its first forward
  };
  Tensor folded_call(const Tensor& x, Module* activation_module, Activation act);
  // The folded weight and bias, refreshed first if a source changed.
  Fold folded();
  // Drops the folded tensors when either module is in training mode (eval with gradients on
  // keeps them for the next folded call).
  void release_fold_in_training();

  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm2d> bn_;
  mutable std::mutex mutex_;  // guards the three below
  Fold fold_;
  std::array<TensorStamp, 6> stamps_;  // of the sources the folded tensors came from
  int64_t folds_built_ = 0;
};

}  // namespace ember
