// `ember models`: every model ember can build (nn/models/zoo.h) with its parameters and MACs at
// its default input; `ember models NAME [--image-size S] [--classes C]`: that model's summary
// (layers, output shapes, parameters, MACs) without training it.
//
//   list_models(std::cout);
//   print_model_summary({.name = "se_resnext101_32x4d", .image_size = 224}, std::cout);
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace ember::apps {

struct ModelsOptions {
  std::string name;        // empty: list every model
  int64_t image_size = 0;  // 0: the model's default
  int64_t classes = 0;     // 0: the model's default
};

// One row per model: name, input shape, classes, parameters, MACs (batch 1), description.
void list_models(std::ostream& out);
// The summary table of one model; an Error when the model cannot take the size or class count.
void print_model_summary(const ModelsOptions& options, std::ostream& out);

}  // namespace ember::apps
