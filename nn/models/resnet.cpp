#include "nn/models/resnet.h"

#include "core/error.h"
#include "ops/ops.h"

namespace ember {

ResNetStem::ResNetStem(StemKind kind, int64_t width, Generator* gen) : Module("ResNetStem") {
  const bool imagenet = kind == StemKind::imagenet;
  conv_ = register_module("conv", resnet_conv(3, width, imagenet ? 7 : 3, imagenet ? 2 : 1, 1, gen));
  bn_ = register_module("bn", resnet_bn(width));
  relu_ = register_module("relu", std::make_shared<ReLU>());
  if (imagenet) pool_ = register_module("pool", std::make_shared<MaxPool2d>(3, 2, 1));
  conv_bn_ = std::make_unique<ConvBn>(conv_, bn_);
}

Tensor ResNetStem::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 3, "ResNet: expected images (N, 3, H, W), got shape ", shape_str(x.shape()));
  const Tensor y = (*conv_bn_)(x, *relu_, Activation::relu);
  return pool_ ? (*pool_)(y) : y;
}

ResNetHead::ResNetHead(int64_t channels, int64_t classes, Generator* gen) : Module("ResNetHead") {
  pool_ = register_module("pool", std::make_shared<AdaptiveAvgPool2d>(1));
  flatten_ = register_module("flatten", std::make_shared<Flatten>());
  fc_ = register_module("fc", std::make_shared<Linear>(channels, classes, true, gen));
}

Tensor ResNetHead::forward(const Tensor& x) { return (*fc_)((*flatten_)((*pool_)(x))); }

namespace {

void check_config(const ResNetConfig& c) {
  EMBER_CHECK(!c.blocks.empty() && c.blocks.size() == c.widths.size(),
              "ResNet: expected as many stage widths as stages (at least one), got ", c.blocks.size(),
              " block counts and ", c.widths.size(), " widths");
  for (size_t i = 0; i < c.blocks.size(); ++i)
    EMBER_CHECK(c.blocks[i] > 0 && c.widths[i] > 0, "ResNet: stage ", i,
                " needs a positive block count and width, got ", c.blocks[i], " and ", c.widths[i]);
  EMBER_CHECK(c.stem_width > 0 && c.classes > 0, "ResNet: expected a positive stem width and class count, got ",
              c.stem_width, " and ", c.classes);
}

}  // namespace

ResNet::ResNet(ResNetConfig config, Generator* gen) : Module("ResNet"), config_(std::move(config)) {
  const ResNetConfig& c = config_;
  check_config(c);
  stem_ = register_module("stem", std::make_shared<ResNetStem>(c.stem, c.stem_width, gen));
  layers_ = register_module("layers", std::make_shared<Sequential>());
  int64_t channels = c.stem_width;
  for (size_t stage = 0; stage < c.blocks.size(); ++stage) {
    auto blocks = std::make_shared<Sequential>();
    for (int64_t b = 0; b < c.blocks[stage]; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      blocks->push_back(std::make_shared<Bottleneck>(BottleneckOptions{.in = channels,
                                                                       .width = c.widths[stage],
                                                                       .expansion = c.expansion,
                                                                       .cardinality = c.cardinality,
                                                                       .stride = stride,
                                                                       .se_squeeze = c.se_squeeze},
                                                     gen));
      channels = c.widths[stage] * c.expansion;
    }
    layers_->push_back(blocks);
  }
  head_ = register_module("head", std::make_shared<ResNetHead>(channels, c.classes, gen));
}

Tensor ResNet::forward(const Tensor& x) { return (*head_)((*layers_)((*stem_)(x))); }

namespace {

// The 32x4d ResNeXts: widths 128..1024 (32 groups of 4 channels in the first stage), expansion 2.
ResNetConfig resnext_32x4d(std::vector<int64_t> blocks, int64_t se_squeeze, int64_t classes) {
  return {.blocks = std::move(blocks), .widths = {128, 256, 512, 1024}, .expansion = 2, .cardinality = 32,
          .se_squeeze = se_squeeze, .classes = classes};
}

}  // namespace

std::shared_ptr<ResNet> resnet50(int64_t classes, Generator* gen) {
  return std::make_shared<ResNet>(ResNetConfig{.classes = classes}, gen);
}

std::shared_ptr<ResNet> resnext50_32x4d(int64_t classes, Generator* gen) {
  return std::make_shared<ResNet>(resnext_32x4d({3, 4, 6, 3}, 0, classes), gen);
}

std::shared_ptr<ResNet> se_resnext50_32x4d(int64_t classes, Generator* gen) {
  return std::make_shared<ResNet>(resnext_32x4d({3, 4, 6, 3}, 16, classes), gen);
}

std::shared_ptr<ResNet> se_resnext101_32x4d(int64_t classes, Generator* gen) {
  return std::make_shared<ResNet>(resnext_32x4d({3, 4, 23, 3}, 16, classes), gen);
}

std::shared_ptr<ResNet> se_resnext_cifar(int64_t classes, int64_t depth, int64_t width, Generator* gen) {
  EMBER_CHECK(depth >= 11 && (depth - 2) % 9 == 0, "se_resnext_cifar: depth must be 9n + 2 with n >= 1 (11, 20, 29, ...), got ",
              depth);
  EMBER_CHECK(width >= 8 && width % 8 == 0, "se_resnext_cifar: width must be a positive multiple of 8 (the cardinality), got ",
              width);
  const int64_t n = (depth - 2) / 9;
  return std::make_shared<ResNet>(ResNetConfig{.blocks = {n, n, n},
                                               .widths = {width, 2 * width, 4 * width},
                                               .expansion = 2,
                                               .cardinality = 8,
                                               .se_squeeze = 16,
                                               .stem_width = width,
                                               .stem = StemKind::cifar,
                                               .classes = classes},
                                  gen);
}

}  // namespace ember
