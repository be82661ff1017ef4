#include "nn/conv_bn.h"

#include <utility>

#include "autograd/graph.h"
#include "core/error.h"
#include "ops/autocast.h"
#include "ops/ops.h"

namespace ember {

ConvBn::ConvBn(std::shared_ptr<Conv2d> conv, std::shared_ptr<BatchNorm2d> bn)
    : conv_(std::move(conv)), bn_(std::move(bn)) {
  EMBER_CHECK(conv_ && bn_, "ConvBn: expected a convolution and a batch norm, got a null module");
  EMBER_CHECK(conv_->options().out == bn_->running_mean().numel(), "ConvBn: the convolution has ",
              conv_->options().out, " output channels but the batch norm normalises ", bn_->running_mean().numel());
}

bool ConvBn::folds() const {
  return !autograd::is_grad_enabled() && !autocast_dtype() && !conv_->is_training() && !bn_->is_training();
}

int64_t ConvBn::folds_built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return folds_built_;
}

Tensor ConvBn::operator()(const Tensor& x) {
  if (folds()) return folded_call(x, nullptr, Activation::none);
  release_fold_in_training();
  return (*bn_)((*conv_)(x));
}

Tensor ConvBn::operator()(const Tensor& x, Module& activation_module, Activation act) {
  if (folds()) return folded_call(x, &activation_module, act);
  release_fold_in_training();
  return bn_->call_activated((*conv_)(x), activation_module, act);
}

Tensor ConvBn::folded_call(const Tensor& x, Module* activation_module, Activation act) {
  const Fold fold = folded();
  const Conv2dOptions& o = conv_->options();
  Tensor y = conv2d(x, fold.weight, fold.bias, o.stride, o.padding, o.dilation, o.groups, act, fold.pack.get());
  conv_->record_fused_call(y.shape());
  bn_->record_fused_call(y.shape());
  if (activation_module) activation_module->record_fused_call(y.shape());
  return y;
}

void ConvBn::release_fold_in_training() {
  if (!conv_->is_training() && !bn_->is_training()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fold_.weight.defined()) return;  // the usual case: every training step after the first
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
  // In f32 (f64 for f64 weights) whatever the parameters' dtypes, rounded once at the end.
  const DType exact = w.dtype() == DType::f64 ? DType::f64 : DType::f32;
  auto widened = [&](const Tensor& t) { return t.defined() ? t.to(exact) : t; };
  const Tensor invstd = rsqrt(add(widened(bn_->running_var()), bn_->eps()));
  const Tensor scale = bn_->weight().defined() ? mul(widened(bn_->weight()), invstd) : invstd;  // s, (Cout)
  Tensor shift = neg(mul(widened(bn_->running_mean()), scale));                               // t without beta
  if (bn_->bias().defined()) shift = add(shift, widened(bn_->bias()));
  if (conv_->bias().defined()) shift = add(shift, mul(widened(conv_->bias()), scale));
  fold_ = {mul(widened(w), scale.reshape({w.size(0), 1, 1, 1})).to(w.dtype()), shift.to(w.dtype()),
           std::make_shared<Conv2dWeightPack>()};
  for (size_t i = 0; i < sources.size(); ++i) stamps_[i] = TensorStamp(sources[i]);
  ++folds_built_;
  return fold_;
}

}  // namespace ember
