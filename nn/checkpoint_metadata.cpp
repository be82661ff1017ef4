// The __metadata__ half of a training checkpoint (layout in nn/checkpoint.h): the entries
// save_checkpoint writes and their validation on load. Apart from the tensor half so that
// fuzz_checkpoint (tests/fuzz) can drive it with nothing above core.
#include <limits>

#include "core/error.h"
#include "core/json.h"
#include "core/json_fields.h"
#include "nn/checkpoint.h"

namespace ember {

namespace {

constexpr const char* kFormat = "ember.training_checkpoint.v1";

const std::string& metadata_entry(const std::map<std::string, std::string>& metadata, const std::string& key,
                                  const std::string& path) {
  auto it = metadata.find(key);
  EMBER_CHECK(it != metadata.end(), "load_checkpoint: '", path, "' has no '", key,
              "' entry in its __metadata__; is it an ember training checkpoint?");
  return it->second;
}

}  // namespace

std::map<std::string, std::string> checkpoint_metadata(const TrainingCheckpoint& ck) {
  Json counters = Json::object();
  for (const auto& [name, value] : ck.counters) counters.set(name, Json(value));
  Json progress = Json::object();
  progress.set("epoch", Json(ck.epoch));
  progress.set("step", Json(ck.step));
  progress.set("counters", std::move(counters));
  Json rng = Json::object();
  for (const auto& [name, state] : ck.rng) {
    Json entry = Json::object();
    entry.set("seed", std::to_string(state.seed));
    entry.set("offset", std::to_string(state.offset));
    rng.set(name, std::move(entry));
  }
  // Stored as given, after checking that it is JSON: a config that cannot be read back would
  // only be discovered at resume time.
  Json::parse(ck.config, "save_checkpoint: config");
  EMBER_CHECK(Json::parse(ck.history, "save_checkpoint: history").is_array(),
              "save_checkpoint: expected the history to be a JSON array of epoch records");
  return {{"format", kFormat},
          {"progress", progress.dump()},
          {"rng", rng.dump()},
          {"config", ck.config},
          {"history", ck.history}};
}

void check_checkpoint_format(const std::map<std::string, std::string>& metadata, const std::string& path) {
  const std::string& format = metadata_entry(metadata, "format", path);
  EMBER_CHECK(format == kFormat, "load_checkpoint: '", path, "' has format '", format, "', expected '", kFormat, "'");
}

void read_checkpoint_metadata(const std::map<std::string, std::string>& metadata, const std::string& path,
                              TrainingCheckpoint& ck) {
  // Note [Checkpoint fields]: every value is read through core/json_fields.h, so a wrong kind,
  // a missing field or a value out of range is an Error naming the file and the field.
  const std::string where = "checkpoint '" + path + "'";
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::string progress_where = where + " progress";
  const Json progress = Json::parse(metadata_entry(metadata, "progress", path), progress_where);
  ck.epoch = json_int(json_field(progress, "epoch", progress_where), progress_where + ".epoch", 0, kMax);
  ck.step = json_int(json_field(progress, "step", progress_where), progress_where + ".step", 0, kMax);
  const std::string counters_where = progress_where + ".counters";
  for (const auto& [name, value] : json_object(json_field(progress, "counters", progress_where), counters_where))
    ck.counters[name] = json_int(value, counters_where + "." + name, 0, kMax);
  const std::string rng_where = where + " rng";
  const Json rng = Json::parse(metadata_entry(metadata, "rng", path), rng_where);
  for (const auto& [name, entry] : json_object(rng, rng_where)) {
    const std::string entry_where = rng_where + "." + name;
    ck.rng[name] = {json_u64_string(json_field(entry, "seed", entry_where), entry_where + ".seed"),
                    json_u64_string(json_field(entry, "offset", entry_where), entry_where + ".offset")};
  }
  ck.config = metadata_entry(metadata, "config", path);
  Json::parse(ck.config, where + " config");
  // Optional: checkpoints written before the history was kept have none.
  if (auto it = metadata.find("history"); it != metadata.end()) {
    EMBER_CHECK(Json::parse(it->second, where + " history").is_array(), where,
                " history: expected a JSON array of epoch records");
    ck.history = it->second;
  } else {
    ck.history = "[]";
  }
}

}  // namespace ember
