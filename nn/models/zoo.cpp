#include "nn/models/zoo.h"

#include "core/error.h"
#include "nn/models/mnist.h"
#include "nn/models/resnet.h"

namespace ember {

namespace {

ModelEntry mnist_entry(std::string name, std::string description,
                       std::function<std::shared_ptr<Module>(Generator*)> build) {
  return {.name = std::move(name), .description = std::move(description), .channels = 1, .image_size = 28,
          .any_image_size = false, .classes = 10, .any_classes = false,
          .build = [build = std::move(build)](int64_t, Generator* gen) { return build(gen); }};
}

std::vector<ModelEntry> make_zoo() {
  std::vector<ModelEntry> zoo;
  zoo.push_back(mnist_entry("mlp", "MNIST: 784-256-128-10 perceptron",
                            [](Generator* g) { return mlp({784, 256, 128, 10}, g); }));
  zoo.push_back(mnist_entry("mnist_cnn", "MNIST: two 3x3 convs, two fc layers", [](Generator* g) { return mnist_cnn(g); }));
  zoo.push_back(mnist_entry("lenet5", "MNIST: LeNet-5 with ReLU and max pooling", [](Generator* g) { return lenet5(g); }));
  zoo.push_back({.name = "mnist_embedding_net",
                 .description = "MNIST: mnist_cnn with a linear embedding head (--classes = embedding size)",
                 .channels = 1, .image_size = 28, .any_image_size = false, .classes = 128,
                 .build = [](int64_t dim, Generator* g) { return mnist_embedding_net(dim, g); }});
  auto resnet = [&](std::string name, std::string description, auto build) {
    zoo.push_back({.name = std::move(name), .description = std::move(description),
                   .build = [build](int64_t classes, Generator* g) -> std::shared_ptr<Module> { return build(classes, g); }});
  };
  resnet("resnet50", "ResNet-50 (NVIDIA DeepLearningExamples)", [](int64_t c, Generator* g) { return resnet50(c, g); });
  resnet("resnext50_32x4d", "ResNeXt-50 32x4d", [](int64_t c, Generator* g) { return resnext50_32x4d(c, g); });
  resnet("se_resnext50_32x4d", "SE-ResNeXt-50 32x4d", [](int64_t c, Generator* g) { return se_resnext50_32x4d(c, g); });
  resnet("se_resnext101_32x4d", "SE-ResNeXt-101 32x4d (NVIDIA DeepLearningExamples)",
         [](int64_t c, Generator* g) { return se_resnext101_32x4d(c, g); });
  zoo.push_back({.name = "se_resnext_cifar", .description = "small CIFAR-style SE-ResNeXt (depth 11, width 32)",
                 .image_size = 32, .classes = 10,
                 .build = [](int64_t c, Generator* g) { return se_resnext_cifar(c, 11, 32, g); }});
  return zoo;
}

}  // namespace

const std::vector<ModelEntry>& model_zoo() {
  static const std::vector<ModelEntry> zoo = make_zoo();
  return zoo;
}

std::string model_names() {
  std::string names;
  for (const ModelEntry& m : model_zoo()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

const ModelEntry& find_model(const std::string& name) {
  for (const ModelEntry& m : model_zoo())
    if (m.name == name) return m;
  EMBER_FAIL("find_model: unknown model '", name, "' (known: ", model_names(), ")");
}

}  // namespace ember
