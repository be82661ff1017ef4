// Every model ember can build, by name: the MNIST models and the ResNet family. For the CLI
// (`ember models`) and for programs that pick a model from a string.
//
//   for (const ModelEntry& m : model_zoo()) std::cout << m.name << "\n";
//   const ModelEntry& entry = find_model("se_resnext50_32x4d");
//   std::shared_ptr<Module> net = entry.build(/*classes=*/100, nullptr);
//   std::cout << net->summary(entry.input_shape(/*batch=*/1, entry.image_size));
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/shape.h"
#include "nn/module.h"

namespace ember {

struct ModelEntry {
  std::string name;
  std::string description;
  int64_t channels = 3;       // of the input images
  int64_t image_size = 224;   // the default (square) input size
  bool any_image_size = true; // false: only image_size works (the MNIST models' flatten sizes)
  int64_t classes = 1000;     // the default number of outputs
  bool any_classes = true;    // false: the output size is fixed
  std::function<std::shared_ptr<Module>(int64_t classes, Generator* gen)> build;

  // (batch, channels, size, size).
  Shape input_shape(int64_t batch, int64_t size) const { return {batch, channels, size, size}; }
};

// In the order `ember models` lists them.
const std::vector<ModelEntry>& model_zoo();
// The entry called `name`; an Error listing the known names otherwise.
const ModelEntry& find_model(const std::string& name);
// "mlp, mnist_cnn, ..." in zoo order.
std::string model_names();

}  // namespace ember
