#include "nn/checkpoint.h"

#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "core/json_fields.h"

namespace ember {

namespace {

constexpr const char* kFormat = "ember.training_checkpoint.v1";
const char* const kSections[] = {"model.", "optimizer.", "scheduler."};

const std::string& metadata_entry(const std::map<std::string, std::string>& metadata, const std::string& key,
                                  const std::string& path) {
  auto it = metadata.find(key);
  EMBER_CHECK(it != metadata.end(), "load_checkpoint: '", path, "' has no '", key,
              "' entry in its __metadata__; is it an ember training checkpoint?");
  return it->second;
}

}  // namespace

void save_tensors(const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> host;  // keeps the CPU copies alive while writing
  std::vector<SafetensorsEntry> entries;
  host.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK(t.defined(), "save_tensors: tensor '", name, "' is undefined");
    host.push_back(t.detach().cpu().contiguous());
    entries.push_back({name, t.dtype(), t.shape(), host.back().raw_data()});
  }
  write_safetensors(path, entries, metadata);
}

Tensor tensor_from_safetensors(const SafetensorsTensor& st, const std::string& what) {
  EMBER_CHECK(st.dtype != DType::f16 && st.dtype != DType::bf16, "load_tensors: tensor '", st.name, "' of ", what,
              " has dtype ", dtype_name(st.dtype), ", which ember tensors do not support yet");
  Tensor t = Tensor::empty(st.shape, {.dtype = st.dtype});
  EMBER_CHECK(t.nbytes() == st.bytes.size(), "load_tensors: tensor '", st.name, "' of ", what, " has ",
              st.bytes.size(), " bytes, expected ", t.nbytes());
  if (!st.bytes.empty()) std::memcpy(t.raw_data(), st.bytes.data(), st.bytes.size());
  return t;
}

StateDict load_tensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  SafetensorsFile file = read_safetensors(path);
  StateDict out;
  for (const SafetensorsTensor& st : file.tensors) out.emplace(st.name, tensor_from_safetensors(st, "'" + path + "'"));
  if (metadata) *metadata = std::move(file.metadata);
  return out;
}

RngState rng_state(const Generator& gen) { return {gen.seed(), gen.offset()}; }
void restore_rng(Generator& gen, const RngState& state) { gen.set_state(state.seed, state.offset); }

void save_checkpoint(const std::string& path, const TrainingCheckpoint& ck) {
  StateDict all;
  add_prefixed(all, "model.", ck.model);
  add_prefixed(all, "optimizer.", ck.optimizer);
  add_prefixed(all, "scheduler.", ck.scheduler);

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
  save_tensors(path, all,
               {{"format", kFormat}, {"progress", progress.dump()}, {"rng", rng.dump()}, {"config", ck.config}});
}

TrainingCheckpoint load_checkpoint(const std::string& path) {
  std::map<std::string, std::string> metadata;
  StateDict all = load_tensors(path, &metadata);
  const std::string& format = metadata_entry(metadata, "format", path);
  EMBER_CHECK(format == kFormat, "load_checkpoint: '", path, "' has format '", format, "', expected '", kFormat, "'");

  TrainingCheckpoint ck;
  for (const auto& [name, t] : all) {
    bool known = false;
    for (const char* section : kSections) known = known || name.rfind(section, 0) == 0;
    EMBER_CHECK(known, "load_checkpoint: '", path, "' holds tensor '", name,
                "', which belongs to no section (expected a name starting with model., optimizer. or scheduler.)");
  }
  ck.model = sub_state_dict(all, "model.");
  ck.optimizer = sub_state_dict(all, "optimizer.");
  ck.scheduler = sub_state_dict(all, "scheduler.");

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
  ck.source = path;
  return ck;
}

const RngState& checkpoint_rng(const TrainingCheckpoint& ck, const std::string& name) {
  auto it = ck.rng.find(name);
  EMBER_CHECK(it != ck.rng.end(), "checkpoint '", ck.source, "': its rng metadata has no '", name,
              "' generator, which a resumed run needs");
  return it->second;
}

int64_t checkpoint_counter(const TrainingCheckpoint& ck, const std::string& name) {
  auto it = ck.counters.find(name);
  EMBER_CHECK(it != ck.counters.end(), "checkpoint '", ck.source, "': its progress.counters has no '", name,
              "', which a resumed run needs");
  return it->second;
}

}  // namespace ember
