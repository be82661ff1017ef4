// TrainMnistConfig as the JSON a training checkpoint stores (train_mnist.h).
#include <string>

#include "apps/train/train_mnist.h"
#include "core/error.h"
#include "core/json_fields.h"

namespace ember::apps {

Json TrainMnistConfig::to_json() const {
  Json j = Json::object();
  write_json(j);
  j.set("model", model);
  return j;
}

TrainMnistConfig TrainMnistConfig::from_json(const Json& j, const std::string& where) {
  TrainMnistConfig c;
  for (const auto& [key, value] : json_object(j, where)) {
    if (c.read_json_field(key, value, where)) continue;
    if (key == "model") c.model = json_string(value, where + ".model");
    else EMBER_FAIL("train mnist: unknown configuration key '", key, "' in ", where);
  }
  return c;
}

}  // namespace ember::apps
