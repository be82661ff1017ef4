// `ember models` (apps/models_command.h): the list names every model with its figures; one
// model's summary honours --image-size and --classes and refuses what the model cannot take.
#include <catch2/catch.hpp>

#include <sstream>

#include "apps/models_command.h"
#include "nn/models/zoo.h"
#include "support/test_support.h"

using namespace ember;
using Catch::Matchers::Contains;

TEST_CASE("ember models: lists every model of the zoo with parameters and MACs") {
  std::ostringstream out;
  apps::list_models(out);
  const std::string table = out.str();
  for (const ModelEntry& m : model_zoo()) CHECK_THAT(table, Contains(m.name));
  // se_resnext101_32x4d: 45,251,128 parameters, 7,971,037,184 MACs at 224x224 (tests/nn/test_resnet.cpp).
  CHECK_THAT(table, Contains("se_resnext101_32x4d   (1, 3, 224, 224)      1000     45.25 M      7.97 G"));
  CHECK_THAT(table, Contains("lenet5                (1, 1, 28, 28)          10     61.71 K"));
}

TEST_CASE("ember models NAME: the summary at another image size and class count") {
  std::ostringstream out;
  apps::print_model_summary({.name = "se_resnext_cifar", .image_size = 64, .classes = 100}, out);
  const std::string s = out.str();
  CHECK_THAT(s, Contains("se_resnext_cifar: small CIFAR-style SE-ResNeXt (depth 11, width 32), 100 classes"));
  CHECK_THAT(s, Contains("ResNet summary for input (1, 3, 64, 64)"));
  CHECK_THAT(s, Contains("(1, 256, 16, 16)"));  // the last stage at 64 / 4
  // The classifier: 256 * 100 MACs; parameters 152,730 - 2570 (the 10-class fc) + 25,700.
  const size_t fc = s.find("head.fc");
  REQUIRE(fc != std::string::npos);
  const std::string fc_row = s.substr(fc, s.find('\n', fc) - fc);
  CHECK_THAT(fc_row, Contains("Linear") && Contains("(1, 100)") && Contains(" 25700 ") && Contains(" 25,600"));
  CHECK_THAT(s, Contains("Total parameters: " + std::to_string(152'730 - 2570 + 25'700)));
  // Four times the pixels of 32x32: four times the convolution MACs, the same SE MACs
  // (2 * 16 * (64 + 128 + 256) = 14,336), the new fc. At 32x32 the total is 26,460,672 with a
  // 2560-MAC fc, so the convolutions are 26,460,672 - 2560 - 14,336 = 26,443,776:
  // 4 * 26,443,776 + 14,336 + 25,600 = 105,815,040.
  CHECK_THAT(s, Contains("Total MACs: 105,815,040"));
}

TEST_CASE("ember models NAME: refuses sizes and class counts the model cannot take") {
  std::ostringstream out;
  CHECK_THAT(test::error_of([&] { apps::print_model_summary({.name = "lenet5", .image_size = 32}, out); }),
             Contains("lenet5 takes only 28x28 images, got --image-size 32"));
  CHECK_THAT(test::error_of([&] { apps::print_model_summary({.name = "mnist_cnn", .classes = 5}, out); }),
             Contains("mnist_cnn has a fixed 10 outputs, got --classes 5"));
  CHECK_THAT(test::error_of([&] { apps::print_model_summary({.name = "resnet51"}, out); }),
             Contains("unknown model 'resnet51'"));
}
