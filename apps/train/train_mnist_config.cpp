// TrainMnistConfig as the JSON a training checkpoint stores (train_mnist.h).
#include <string>

#include "apps/train/train_mnist.h"
#include "core/error.h"

namespace ember::apps {

Json TrainMnistConfig::to_json() const {
  Json j = Json::object();
  j.set("data", data);
  j.set("dataset", dataset);
  j.set("model", model);
  j.set("epochs", int64_t(epochs));
  j.set("batch_size", batch_size);
  j.set("lr", lr);
  j.set("momentum", momentum);
  j.set("optimizer", optimizer);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule);
  j.set("seed", std::to_string(seed));
  j.set("device", device);
  return j;
}

TrainMnistConfig TrainMnistConfig::from_json(const Json& j) {
  TrainMnistConfig c;
  for (const auto& [key, value] : j.as_object()) {
    if (key == "data") c.data = value.as_string();
    else if (key == "dataset") c.dataset = value.as_string();
    else if (key == "model") c.model = value.as_string();
    else if (key == "epochs") c.epochs = int(value.as_int());
    else if (key == "batch_size") c.batch_size = value.as_int();
    else if (key == "lr") c.lr = value.as_double();
    else if (key == "momentum") c.momentum = value.as_double();
    else if (key == "optimizer") c.optimizer = value.as_string();
    else if (key == "weight_decay") c.weight_decay = value.as_double();
    else if (key == "schedule") c.schedule = value.as_string();
    else if (key == "seed") c.seed = std::stoull(value.as_string());
    else if (key == "device") c.device = value.as_string();
    else EMBER_FAIL("train mnist: unknown configuration key '", key, "' in the checkpoint");
  }
  return c;
}

}  // namespace ember::apps
