// TrainingOptions (training_options.h): JSON, resume merge and checks shared by the train commands.
#include "apps/train/training_options.h"

#include "core/error.h"

namespace ember::apps {

void TrainingOptions::write_json(Json& j) const {
  j.set("data", data);
  j.set("dataset", dataset);
  j.set("epochs", int64_t(epochs));
  j.set("batch_size", batch_size);
  j.set("lr", lr);
  j.set("momentum", momentum);
  j.set("optimizer", optimizer);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule);
  j.set("seed", std::to_string(seed));  // uint64 as a decimal string (nn/checkpoint.h)
  j.set("device", device);
}

bool TrainingOptions::read_json_field(const std::string& key, const Json& value) {
  if (key == "data") data = value.as_string();
  else if (key == "dataset") dataset = value.as_string();
  else if (key == "epochs") epochs = int(value.as_int());
  else if (key == "batch_size") batch_size = value.as_int();
  else if (key == "lr") lr = value.as_double();
  else if (key == "momentum") momentum = value.as_double();
  else if (key == "optimizer") optimizer = value.as_string();
  else if (key == "weight_decay") weight_decay = value.as_double();
  else if (key == "schedule") schedule = value.as_string();
  else if (key == "seed") seed = std::stoull(value.as_string());
  else if (key == "device") device = value.as_string();
  else return false;
  return true;
}

void TrainingOptions::take_run_control(const TrainingOptions& given) {
  data = given.data;
  if (given.epochs > 0) epochs = given.epochs;
  save = given.save;
  log = given.log;
  plot = given.plot;
  max_batches = given.max_batches;
  stop_after = given.stop_after;
  resume = given.resume;
}

void TrainingOptions::check(const std::string& command) const {
  EMBER_CHECK(dataset == "mnist" || dataset == "fashion-mnist", command, ": unknown dataset '", dataset,
              "' (expected mnist or fashion-mnist)");
  EMBER_CHECK(epochs >= 1, command, ": epochs must be at least 1, got ", epochs);
  EMBER_CHECK(batch_size >= 1, command, ": batch size must be at least 1, got ", batch_size);
  EMBER_CHECK(optimizer == "sgd" || optimizer == "adam" || optimizer == "adamw", command, ": unknown optimizer '",
              optimizer, "' (expected sgd, adam or adamw)");
  EMBER_CHECK(schedule == "cosine" || schedule == "none", command, ": unknown schedule '", schedule,
              "' (expected cosine or none)");
}

}  // namespace ember::apps
