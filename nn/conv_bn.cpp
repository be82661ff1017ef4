#include "nn/conv_bn.h"

#include <utility>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/ops.h"

namespace ember {

ConvBn::ConvBn(std::shared_ptr<Conv2d> conv, std::shared_ptr<BatchNorm> bn) : conv_(std::move(conv)), bn_(std::move(bn)) {
  EMBER_CHECK(conv_ && bn_, "ConvBn: expected a convolution and a batch norm, got a null module");
  EMBER_CHECK(conv_->options().out == bn_->running_mean().numel(), "ConvBn: the convolution has ",
              conv_->options().out, " output channels but the batch norm normalises ", bn_->running_mean().numel());
}

bool ConvBn::folds() const { return !autograd::is_grad_enabled() && !conv_->is_training() && !bn_->is_training(); }

Tensor ConvBn::operator()(const Tensor& x, Module* activation_module, Activation act) {
  if (!folds()) {
    release_fold();
    const Tensor y = (*conv_)(x);
    if (activation_module) return bn_->call_activated(y, *activation_module, act);
    Tensor z = bn_->forward_activated(y, act);
    bn_->record_fused_call(z.shape());
    return z;
  }
  const Fold fold = folded();
  const Conv2dOptions& o = conv_->options();
  Tensor y = conv2d(x, fold.weight, fold.bias, o.stride, o.padding, o.dilation, o.groups, act, fold.pack.get());
  conv_->record_fused_call(y.shape());
  bn_->record_fused_call(y.shape());
  if (activation_module) activation_module->record_fused_call(y.shape());
  return y;
}

void ConvBn::release_fold() {
  std::lock_guard<std::mutex> lock(mutex_);
  fold_ = {};
  stamps_ = {};
}

ConvBn::Fold ConvBn::folded() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::array<Tensor, 6> sources{conv_->weight(), conv_->bias(), bn_->weight(), bn_->bias(), bn_->running_mean(),
                                      bn_->running_var()};
  bool fresh = fold_.weight.defined();
  for (size_t i = 0; i < sources.size(); ++i) fresh = fresh && stamps_[i].matches(sources[i]);
  if (fresh) return fold_;
  autograd::NoGradGuard no_grad;
  const Tensor& w = conv_->weight();
  const Tensor invstd = rsqrt(add(bn_->running_var(), bn_->eps()));
  const Tensor scale = bn_->weight().defined() ? mul(bn_->weight(), invstd) : invstd;  // s, (Cout)
  Tensor shift = neg(mul(bn_->running_mean(), scale));                                 // t without beta
  if (bn_->bias().defined()) shift = add(shift, bn_->bias());
  if (conv_->bias().defined()) shift = add(shift, mul(conv_->bias(), scale));
  fold_ = {mul(w, scale.reshape({w.size(0), 1, 1, 1})), shift, std::make_shared<Conv2dWeightPack>()};
  for (size_t i = 0; i < sources.size(); ++i) stamps_[i] = TensorStamp(sources[i]);
  return fold_;
}

}  // namespace ember
