// TrainSeresnextConfig: NVIDIA's defaults, the JSON a checkpoint stores, checks and the derived
// values of the recipe (train_seresnext.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "apps/train/train_seresnext.h"
#include "core/error.h"
#include "core/json_fields.h"

namespace ember::apps {

TrainSeresnextConfig::TrainSeresnextConfig() {
  data = "data/fashion-mnist-png";
  epochs = 90;
  batch_size = 64;
  lr = 0.256;  // per 256 images
  momentum = 0.875;
  optimizer = "sgd";
  weight_decay = 6.103515625e-05;
  schedule = "cosine";
}

Json TrainSeresnextConfig::to_json() const {
  Json j = Json::object();
  write_json(j);
  j.set("model", model);
  j.set("depth", depth);
  j.set("width", width);
  j.set("image_size", image_size);
  j.set("crop_scale", crop_scale);
  j.set("warmup_epochs", int64_t(warmup_epochs));
  j.set("schedule_unit", schedule_unit);
  j.set("label_smoothing", label_smoothing);
  j.set("mixup", mixup);
  j.set("target_batch", target_batch);
  j.set("sync_bn", sync_bn);
  j.set("bad_images", bad_images);
  return j;
}

TrainSeresnextConfig TrainSeresnextConfig::from_json(const Json& j, const std::string& where) {
  TrainSeresnextConfig c;
  constexpr double kBig = 1e300;
  for (const auto& [key, value] : json_object(j, where)) {
    if (c.read_json_field(key, value, where)) continue;
    const std::string field = where + "." + key;
    if (key == "model") c.model = json_string(value, field);
    else if (key == "depth") c.depth = json_int(value, field, 2);
    else if (key == "width") c.width = json_int(value, field, 1);
    else if (key == "image_size") c.image_size = json_int(value, field, 0);
    else if (key == "crop_scale") c.crop_scale = json_number(value, field, 0.0, 1.0);
    else if (key == "warmup_epochs") c.warmup_epochs = int(json_int(value, field, -1, 1 << 30));  // -1: the default length
    else if (key == "schedule_unit") c.schedule_unit = json_string(value, field);
    else if (key == "label_smoothing") c.label_smoothing = json_number(value, field, 0.0, 1.0);
    else if (key == "mixup") c.mixup = json_number(value, field, 0.0, kBig);
    else if (key == "target_batch") c.target_batch = json_int(value, field, 0);
    else if (key == "sync_bn") {
      EMBER_CHECK(value.is_bool(), "train seresnext: ", field, " must be true or false");
      c.sync_bn = value.as_bool();
    }
    else if (key == "bad_images") c.bad_images = json_string(value, field);
    else EMBER_FAIL("train seresnext: unknown configuration key '", key, "' in ", where);
  }
  return c;
}

void TrainSeresnextConfig::check() const {
  const std::string command = "train seresnext";
  TrainingOptions::check(command);
  EMBER_CHECK(image_size == 0 || image_size >= 8, command, ": image size must be at least 8, got ", image_size);
  EMBER_CHECK(crop_scale >= 0 && crop_scale <= 1, command, ": crop scale must be in (0, 1], got ", crop_scale);
  EMBER_CHECK(schedule_unit == "epoch" || schedule_unit == "step", command, ": unknown schedule unit '",
              schedule_unit, "' (expected epoch or step)");
  EMBER_CHECK(label_smoothing >= 0 && label_smoothing < 1, command, ": label smoothing must be in [0, 1), got ",
              label_smoothing);
  EMBER_CHECK(mixup >= 0, command, ": mixup alpha must be >= 0, got ", mixup);
  EMBER_CHECK(target_batch >= 0, command, ": target batch must be >= 0, got ", target_batch);
  EMBER_CHECK(warmup_epochs < epochs, command, ": --warmup-epochs ", warmup_epochs, " must be less than --epochs ",
              epochs);
  EMBER_CHECK(workers >= 1, command, ": workers must be at least 1, got ", workers);
  EMBER_CHECK(prefetch >= 0, command, ": --prefetch must be at least 1 (0: the default), got ", prefetch);
  EMBER_CHECK(bad_images == "fail" || bad_images == "skip", command, ": --bad-images must be fail or skip, got '",
              bad_images, "'");
}

int64_t TrainSeresnextConfig::accumulation() const {
  const int64_t per_micro = batch_size * ranks;  // Note [Training under mpirun]: --target-batch is global
  return target_batch > per_micro ? (target_batch + per_micro - 1) / per_micro : 1;
}

int64_t TrainSeresnextConfig::step_batch() const { return accumulation() * batch_size; }

double TrainSeresnextConfig::applied_lr() const { return lr * double(step_batch() * ranks) / 256.0; }

int TrainSeresnextConfig::resolved_warmup_epochs() const {
  if (warmup_epochs >= 0) return warmup_epochs;
  return std::min(epochs - 1, std::max(1, int(std::lround(8.0 * epochs / 90.0))));
}

int TrainSeresnextConfig::resolved_prefetch() const { return prefetch > 0 ? prefetch : std::max(2, workers); }

}  // namespace ember::apps
