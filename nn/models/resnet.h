// The ResNet family from one builder: ResNet-50, ResNeXt-50 32x4d, SE-ResNeXt-50/101 32x4d as
// NVIDIA's DeepLearningExamples (PyTorch/Classification/ConvNets) build them, and a small
// CIFAR-style SE-ResNeXt that trains on a 2-core machine.
//
//   auto net = se_resnext101_32x4d(1000);            // 45,251,128 parameters
//   Tensor logits = (*net)(images);                  // (N, 3, 224, 224) -> (N, 1000)
//   std::cout << net->summary({1, 3, 224, 224});     // shapes, parameters, MACs per layer
//   auto small = se_resnext_cifar(10, /*depth=*/11, /*width=*/32);   // (N, 3, 32, 32) -> (N, 10)
//
// state_dict names: stem.conv.weight, stem.bn.*, layers.<stage>.<block>.{conv1,bn1,conv2,bn2,
// conv3,bn3}.*, layers.<s>.<b>.se.{squeeze,expand}.*, layers.<s>.0.downsample.{0,1}.*, head.fc.*.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/models/resnet_blocks.h"

namespace ember {

enum class StemKind {
  imagenet,  // conv 7x7/2 (3 -> stem width, no bias) -> BN -> ReLU -> max pool 3x3/2 pad 1
  cifar,     // conv 3x3/1 (3 -> stem width, no bias) -> BN -> ReLU
};

struct ResNetConfig {
  std::vector<int64_t> blocks = {3, 4, 6, 3};       // bottlenecks per stage
  std::vector<int64_t> widths = {64, 128, 256, 512}; // bottleneck width per stage
  int64_t expansion = 4;                             // stage output = width * expansion
  int64_t cardinality = 1;                           // groups of every 3x3 convolution
  int64_t se_squeeze = 0;                            // SE hidden width (absolute); 0: no SE
  int64_t stem_width = 64;
  StemKind stem = StemKind::imagenet;
  int64_t classes = 1000;
};

// x: (N, 3, H, W) -> (N, stem width, H/4, W/4) (imagenet) or (N, stem width, H, W) (cifar).
// Children: conv, bn, relu, [pool].
class ResNetStem : public Module {
 public:
  ResNetStem(StemKind kind, int64_t width, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BatchNorm2d> bn_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<MaxPool2d> pool_;  // null for the cifar stem
  std::unique_ptr<ConvBn> conv_bn_;  // folds in evaluation (Note [Folded batch norm] in nn/conv_bn.h)
};

// x: (N, C, H, W) -> (N, classes): global average pool -> flatten -> Linear(C -> classes).
// Children: pool, flatten, fc.
class ResNetHead : public Module {
 public:
  ResNetHead(int64_t channels, int64_t classes, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<AdaptiveAvgPool2d> pool_;
  std::shared_ptr<Flatten> flatten_;
  std::shared_ptr<Linear> fc_;
};

// stem -> layers (one Sequential of Bottlenecks per stage; the first block of every stage but
// the first has stride 2) -> head. Children: stem, layers, head.
class ResNet : public Module {
 public:
  explicit ResNet(ResNetConfig config, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  const ResNetConfig& config() const { return config_; }

 private:
  ResNetConfig config_;
  std::shared_ptr<ResNetStem> stem_;
  std::shared_ptr<Sequential> layers_;
  std::shared_ptr<ResNetHead> head_;
};

// [3, 4, 6, 3] x widths [64, 128, 256, 512], expansion 4: 25,557,032 parameters at 1000 classes.
std::shared_ptr<ResNet> resnet50(int64_t classes = 1000, Generator* gen = nullptr);
// [3, 4, 6, 3] x widths [128, 256, 512, 1024], expansion 2, cardinality 32: 25,028,904.
std::shared_ptr<ResNet> resnext50_32x4d(int64_t classes = 1000, Generator* gen = nullptr);
// resnext50_32x4d with SE (squeeze 16) in every block: 25,527,592.
std::shared_ptr<ResNet> se_resnext50_32x4d(int64_t classes = 1000, Generator* gen = nullptr);
// [3, 4, 23, 3], otherwise as se_resnext50_32x4d: 45,251,128.
std::shared_ptr<ResNet> se_resnext101_32x4d(int64_t classes = 1000, Generator* gen = nullptr);
// For 32x32 images: cifar stem of `width` channels, three stages of (depth - 2) / 9 SE
// bottlenecks with widths [width, 2 width, 4 width], expansion 2, cardinality 8, squeeze 16.
// depth counts the weighted layers (3 per block, the stem, the classifier) as ResNeXt-29 does:
// 11, 20, 29, ... The default (11, 32) has 152,730 parameters and 26.5 MMAC per 32x32 image.
std::shared_ptr<ResNet> se_resnext_cifar(int64_t classes = 10, int64_t depth = 11, int64_t width = 32,
                                         Generator* gen = nullptr);

}  // namespace ember
