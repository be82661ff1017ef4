// The building blocks of the ResNet family (nn/models/resnet.h): squeeze-and-excitation and the
// bottleneck residual block with its optional downsample and SE.
//
//   SqueezeExcitation se(256, 16);               // (N, 256, H, W) -> s (N, 256), in (0, 1)
//   Bottleneck block({.in = 64, .width = 128, .expansion = 2, .cardinality = 32, .stride = 2,
//                     .se_squeeze = 16});        // (N, 64, H, W) -> (N, 256, H/2, W/2)
//   Tensor y = block(x);
#pragma once

#include <memory>

#include "core/rng.h"
#include "nn/conv_bn.h"
#include "nn/conv_layers.h"
#include "nn/layers.h"
#include "nn/norm_layers.h"
#include "nn/sequential.h"

namespace ember {

// x, residual: (N, C, H, W), s: (N, C) -> relu(x * s[n, c] + residual), the SE block's tail.
Tensor se_tail(const Tensor& x, const Tensor& s, const Tensor& residual);

// Convolution without bias, Kaiming-normal (fan-out, ReLU gain): std = sqrt(2 / (Cout * kH * kW)),
// as torchvision's ResNets and NVIDIA's with --conv_init fan_out (its default is fan_in; issue #17
// asks for fan-out).
std::shared_ptr<Conv2d> resnet_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups,
                                    Generator* gen);
// BatchNorm2d with eps 1e-5, momentum 0.1, weight 1, bias 0.
std::shared_ptr<BatchNorm2d> resnet_bn(int64_t channels);

// x: (N, C, H, W) -> s: (N, C): global average -> Linear(C -> squeeze) -> ReLU ->
// Linear(squeeze -> C) -> sigmoid. Children: pool, squeeze, relu, expand, sigmoid.
// Note [SE as Linear]: NVIDIA writes the two layers as 1x1 convolutions on (N, C, 1, 1); on a
// 1x1 map that is the same arithmetic and the same parameter count as Linear on (N, C), which
// runs one GEMM without im2col. Only the weight shapes differ ((out, in) vs (out, in, 1, 1)).
class SqueezeExcitation : public Module {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<AdaptiveAvgPool2d> pool_;
  std::shared_ptr<Flatten> flatten_;
  std::shared_ptr<Linear> squeeze_, expand_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<Sigmoid> sigmoid_;
};

struct BottleneckOptions {
  int64_t in = 64;           // input channels
  int64_t width = 64;        // channels of the 1x1 and 3x3 convolutions
  int64_t expansion = 4;     // output channels = width * expansion
  int64_t cardinality = 1;   // groups of the 3x3 convolution
  int64_t stride = 1;        // on the 3x3 convolution (and on the downsample)
  int64_t se_squeeze = 0;    // SE's hidden width; 0: no SE
};

// x: (N, in, H, W) -> (N, width * expansion, H / stride, W / stride):
//   1x1 -> BN -> ReLU -> 3x3 grouped (stride) -> BN -> ReLU -> 1x1 -> BN -> [out * SE(out)]
//   -> + residual -> ReLU,
// residual = x, or downsample(x) = 1x1 conv (stride, no bias) -> BN when the stride is not 1 or
// the channels change. Children: conv1, bn1, conv2, bn2, conv3, bn3, relu, [se], [downsample].
class Bottleneck : public Module {
 public:
  explicit Bottleneck(BottleneckOptions options, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  const BottleneckOptions& options() const { return options_; }

 private:
  BottleneckOptions options_;
  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<SqueezeExcitation> se_;     // null without SE
  std::shared_ptr<Sequential> downsample_;    // null for an identity shortcut
  // conv -> bn pairs, folded in evaluation (Note [Folded batch norm] in nn/conv_bn.h).
  std::unique_ptr<ConvBn> conv_bn1_, conv_bn2_, conv_bn3_;
  std::unique_ptr<ConvBn> downsample_conv_bn_;  // null for an identity shortcut
};

}  // namespace ember
