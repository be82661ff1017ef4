#include "apps/models_command.h"

#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "nn/models/zoo.h"

namespace ember::apps {

namespace {

// 7971037184 -> "7.97 G", 26460672 -> "26.46 M".
std::string human(int64_t n) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (n >= 1'000'000'000) os << double(n) / 1e9 << " G";
  else if (n >= 1'000'000) os << double(n) / 1e6 << " M";
  else if (n >= 1'000) os << double(n) / 1e3 << " K";
  else os << n;
  return os.str();
}

}  // namespace

void list_models(std::ostream& out) {
  out << std::left << std::setw(22) << "Model" << std::setw(18) << "Input" << std::right << std::setw(8) << "Classes"
      << std::setw(12) << "Params" << std::setw(12) << "MACs" << "  Description\n";
  for (const ModelEntry& m : model_zoo()) {
    const Shape input = m.input_shape(1, m.image_size);
    const Module::Profile p = m.build(m.classes, nullptr)->profile(input);
    out << std::left << std::setw(22) << m.name << std::setw(18) << shape_str(input) << std::right << std::setw(8)
        << m.classes << std::setw(12) << human(p.total_params) << std::setw(12) << human(p.total_macs) << "  "
        << m.description << "\n";
  }
  out << "MACs per image at the input shown (convolutions and linear layers). `ember models NAME "
         "[--image-size S] [--classes C]` prints one model layer by layer.\n";
}

void print_model_summary(const ModelsOptions& o, std::ostream& out) {
  const ModelEntry& m = find_model(o.name);
  const int64_t size = o.image_size > 0 ? o.image_size : m.image_size;
  const int64_t classes = o.classes > 0 ? o.classes : m.classes;
  EMBER_CHECK(size == m.image_size || m.any_image_size, "models: ", m.name, " takes only ", m.image_size, "x",
              m.image_size, " images, got --image-size ", size);
  EMBER_CHECK(classes == m.classes || m.any_classes, "models: ", m.name, " has a fixed ", m.classes,
              " outputs, got --classes ", classes);
  out << m.name << ": " << m.description << ", " << classes << " classes\n";
  out << m.build(classes, nullptr)->summary(m.input_shape(1, size));
}

}  // namespace ember::apps
