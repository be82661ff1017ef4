// TrainMnistConfig as the JSON a training checkpoint stores (train_mnist.h).
#include <string>

#include "apps/train/train_mnist.h"
#include "core/error.h"

namespace ember::apps {

Json TrainMnistConfig::to_json() const {
  Json j = Json::object();
  write_json(j);
  j.set("model", model);
  return j;
}

TrainMnistConfig TrainMnistConfig::from_json(const Json& j) {
  TrainMnistConfig c;
  for (const auto& [key, value] : j.as_object()) {
    if (c.read_json_field(key, value)) continue;
    if (key == "model") c.model = value.as_string();
    else EMBER_FAIL("train mnist: unknown configuration key '", key, "' in the checkpoint");
  }
  return c;
}

}  // namespace ember::apps
