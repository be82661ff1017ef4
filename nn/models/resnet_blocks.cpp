#include "nn/models/resnet_blocks.h"

#include "core/error.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace ember {

// One fused kernel each way (ops/scale_add_relu.h) instead of mul, add and relu with their three
// outputs and three backward passes.
Tensor se_tail(const Tensor& x, const Tensor& s, const Tensor& residual) { return scale_add_relu(x, s, residual); }

std::shared_ptr<Conv2d> resnet_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                                    Generator* gen) {
  auto conv = std::make_shared<Conv2d>(Conv2dOptions{.in = in, .out = out, .kernel = kernel, .stride = stride,
                                                     .padding = (kernel - 1) / 2, .groups = groups, .bias = false},
                                       gen);
  init::kaiming_normal_(conv->weight(), 0.0, init::FanMode::fan_out, "relu", gen);
  return conv;
}

std::shared_ptr<BatchNorm2d> resnet_bn(int64_t channels) {
  return std::make_shared<BatchNorm2d>(channels, /*eps=*/1e-5, /*momentum=*/0.1);  // weight 1, bias 0
}

SqueezeExcitation::SqueezeExcitation(int64_t channels, int64_t squeeze, Generator* gen) : Module("SqueezeExcitation") {
  EMBER_CHECK(channels > 0 && squeeze > 0, "SqueezeExcitation: expected positive channels and squeeze width, got ",
              channels, " and ", squeeze);
  pool_ = register_module("pool", std::make_shared<AdaptiveAvgPool2d>(1));
  flatten_ = register_module("flatten", std::make_shared<Flatten>());
  squeeze_ = register_module("squeeze", std::make_shared<Linear>(channels, squeeze, true, gen));
  relu_ = register_module("relu", std::make_shared<ReLU>());
  expand_ = register_module("expand", std::make_shared<Linear>(squeeze, channels, true, gen));
  sigmoid_ = register_module("sigmoid", std::make_shared<Sigmoid>());
}

Tensor SqueezeExcitation::forward(const Tensor& x) {
  const Tensor pooled = (*flatten_)((*pool_)(x));  // (N, C)
  const Tensor hidden = squeeze_->call_activated(pooled, *relu_, Activation::relu);
  return expand_->call_activated(hidden, *sigmoid_, Activation::sigmoid);
}

Bottleneck::Bottleneck(BottleneckOptions o, Generator* gen) : Module("Bottleneck"), options_(o) {
  EMBER_CHECK(o.in > 0 && o.width > 0 && o.expansion > 0 && o.cardinality > 0 && o.stride > 0 && o.se_squeeze >= 0,
              "Bottleneck: expected positive in, width, expansion, cardinality and stride and se_squeeze >= 0, got in ",
              o.in, ", width ", o.width, ", expansion ", o.expansion, ", cardinality ", o.cardinality, ", stride ",
              o.stride, ", se_squeeze ", o.se_squeeze);
  EMBER_CHECK(o.width % o.cardinality == 0, "Bottleneck: the cardinality ", o.cardinality,
              " must divide the width ", o.width);
  const int64_t out = o.width * o.expansion;
  conv1_ = register_module("conv1", resnet_conv(o.in, o.width, 1, 1, 1, gen));
  bn1_ = register_module("bn1", resnet_bn(o.width));
  conv2_ = register_module("conv2", resnet_conv(o.width, o.width, 3, o.stride, o.cardinality, gen));
  bn2_ = register_module("bn2", resnet_bn(o.width));
  conv3_ = register_module("conv3", resnet_conv(o.width, out, 1, 1, 1, gen));
  bn3_ = register_module("bn3", resnet_bn(out));
  relu_ = register_module("relu", std::make_shared<ReLU>());
  if (o.se_squeeze > 0) se_ = register_module("se", std::make_shared<SqueezeExcitation>(out, o.se_squeeze, gen));
  conv_bn1_ = std::make_unique<ConvBn>(conv1_, bn1_);
  conv_bn2_ = std::make_unique<ConvBn>(conv2_, bn2_);
  conv_bn3_ = std::make_unique<ConvBn>(conv3_, bn3_);
  if (o.stride != 1 || o.in != out) {
    downsample_ = register_module("downsample", std::make_shared<Sequential>());
    auto conv = resnet_conv(o.in, out, 1, o.stride, 1, gen);
    auto bn = resnet_bn(out);
    downsample_->push_back(conv);
    downsample_->push_back(bn);
    downsample_conv_bn_ = std::make_unique<ConvBn>(conv, bn);
  }
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = (*conv_bn1_)(x, *relu_, Activation::relu);
  out = (*conv_bn2_)(out, *relu_, Activation::relu);
  out = (*conv_bn3_)(out);
  // The downsample Sequential's two modules, run (or folded) by their ConvBn.
  const Tensor residual = downsample_ ? (*downsample_conv_bn_)(x) : x;
  if (se_) return se_tail(out, (*se_)(out), residual);
  return relu(add(out, residual));
}

}  // namespace ember
