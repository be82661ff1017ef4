// TrainingOptions (training_options.h): JSON, resume merge and checks shared by the train commands.
#include "apps/train/training_options.h"

#include <cmath>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_fields.h"

namespace ember::apps {

namespace {

// The ranges a recipe value may take, from a checkpoint or the command line (apps/main.cpp).
constexpr int64_t kMaxEpochs = 100000, kMaxBatchSize = 60000;
constexpr double kMaxLr = 1e6;
constexpr int64_t kMaxRanks = 1 << 16;

}  // namespace

void TrainingOptions::write_json(Json& j) const {
  j.set("data", data);
  j.set("dataset", dataset);
  j.set("epochs", int64_t(epochs));
  j.set("batch_size", batch_size);
  j.set("ranks", int64_t(ranks));
  j.set("lr", lr);
  j.set("momentum", momentum);
  j.set("optimizer", optimizer);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule);
  j.set("seed", std::to_string(seed));  // uint64 as a decimal string (nn/checkpoint.h)
  j.set("device", device);
  j.set("precision", precision);
}

bool TrainingOptions::read_json_field(const std::string& key, const Json& value, const std::string& where) {
  const std::string field = where + "." + key;
  if (key == "data") data = json_string(value, field);
  else if (key == "dataset") dataset = json_string(value, field);
  else if (key == "epochs") epochs = int(json_int(value, field, 1, kMaxEpochs));
  else if (key == "batch_size") batch_size = json_int(value, field, 1, kMaxBatchSize);
  else if (key == "ranks") ranks = int(json_int(value, field, 1, kMaxRanks));
  else if (key == "lr") lr = json_number(value, field, 0, kMaxLr);
  else if (key == "momentum") momentum = json_number(value, field, 0, 1);
  else if (key == "optimizer") optimizer = json_string(value, field);
  else if (key == "weight_decay") weight_decay = json_number(value, field, 0, 1);
  else if (key == "schedule") schedule = json_string(value, field);
  else if (key == "seed") seed = json_u64_string(value, field);
  else if (key == "device") device = json_string(value, field);
  else if (key == "precision") precision = json_string(value, field);
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
  detect_anomaly = given.detect_anomaly;
  resume = given.resume;
  group = given.group;
}

std::string TrainingOptions::fit_to_ranks(int world_size, const std::string& command) {
  if (world_size == ranks) return "";
  const int64_t global = batch_size * ranks;
  EMBER_CHECK(global % world_size == 0, command, ": the checkpoint was trained at ", ranks, " rank(s) x batch ",
              batch_size, " = a global batch of ", global, ", which ", world_size,
              " ranks cannot split evenly; resume at a rank count that divides ", global);
  const std::string note = detail::concat("batch ", global / world_size, " per rank on ", world_size,
                                          " rank(s) keeps the checkpoint's global batch of ", global, " (", ranks,
                                          " x ", batch_size, ")");
  batch_size = global / world_size;
  ranks = world_size;
  return note;
}

void TrainingOptions::check(const std::string& command) const {
  EMBER_CHECK(dataset == "mnist" || dataset == "fashion-mnist", command, ": unknown dataset '", dataset,
              "' (expected mnist or fashion-mnist)");
  EMBER_CHECK(epochs >= 1 && epochs <= kMaxEpochs, command, ": epochs must be in [1, ", kMaxEpochs, "], got ", epochs);
  EMBER_CHECK(batch_size >= 1 && batch_size <= kMaxBatchSize, command, ": batch size must be in [1, ", kMaxBatchSize,
              "], got ", batch_size);
  EMBER_CHECK(std::isfinite(lr) && lr > 0 && lr <= kMaxLr, command, ": lr must be a finite number in (0, ", kMaxLr,
              "], got ", lr);
  EMBER_CHECK(momentum >= 0 && momentum < 1, command, ": momentum must be in [0, 1), got ", momentum);
  EMBER_CHECK(weight_decay >= 0 && weight_decay <= 1, command, ": weight decay must be in [0, 1], got ", weight_decay);
  EMBER_CHECK(max_batches >= 0 && stop_after >= 0, command, ": --dry-run / --stop-after must be non-negative");
  EMBER_CHECK(optimizer == "sgd" || optimizer == "adam" || optimizer == "adamw", command, ": unknown optimizer '",
              optimizer, "' (expected sgd, adam or adamw)");
  EMBER_CHECK(schedule == "cosine" || schedule == "none", command, ": unknown schedule '", schedule,
              "' (expected cosine or none)");
  EMBER_CHECK(precision == "fp32" || precision == "bf16" || precision == "fp16", command, ": unknown precision '",
              precision, "' (expected fp32, bf16 or fp16)");
}

void TrainingOptions::check_outputs(const std::string& command) const {
  if (!save.empty()) check_output_path(save, command + ": --save");
  if (!log.empty()) check_output_path(log, command + ": --log");
  if (!plot.empty()) check_output_path(plot, command + ": --plot");
}

void check_resume_conflicts(const Json& checkpoint_recipe, const Json& given_recipe,
                            const std::vector<std::string>& explicit_keys, const std::string& command) {
  static const std::set<std::string> run_control = {"data", "epochs"};
  std::string conflicts;
  for (const std::string& key : explicit_keys) {
    const Json* given = given_recipe.find(key);
    const Json* stored = checkpoint_recipe.find(key);
    if (!given || run_control.count(key) || (stored && *stored == *given)) continue;
    std::string flag = "--" + key;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    conflicts += (conflicts.empty() ? "" : ", ") + flag + " " + given->dump() + " (checkpoint: " +
                 (stored ? stored->dump() : std::string("not set")) + ")";
  }
  EMBER_CHECK(conflicts.empty(), command, ": --resume continues the checkpoint's recipe, but the command line "
              "contradicts it: ", conflicts, "; drop those flags to resume, or start a new run without --resume");
}

}  // namespace ember::apps
