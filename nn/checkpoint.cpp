#include "nn/checkpoint.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace ember {

namespace {

const char* const kSections[] = {"model.", "optimizer.", "scheduler.", "grad_scaler."};

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
  add_prefixed(all, "grad_scaler.", ck.grad_scaler);
  save_tensors(path, all, checkpoint_metadata(ck));
}

TrainingCheckpoint load_checkpoint(const std::string& path) {
  std::map<std::string, std::string> metadata;
  StateDict all = load_tensors(path, &metadata);
  check_checkpoint_format(metadata, path);

  TrainingCheckpoint ck;
  for (const auto& [name, t] : all) {
    bool known = false;
    for (const char* section : kSections) known = known || name.rfind(section, 0) == 0;
    EMBER_CHECK(known, "load_checkpoint: '", path, "' holds tensor '", name,
                "', which belongs to no section (expected a name starting with model., optimizer., scheduler. or grad_scaler.)");
  }
  ck.model = sub_state_dict(all, "model.");
  ck.optimizer = sub_state_dict(all, "optimizer.");
  ck.scheduler = sub_state_dict(all, "scheduler.");
  ck.grad_scaler = sub_state_dict(all, "grad_scaler.");  // Note [Optional sections]
  read_checkpoint_metadata(metadata, path, ck);
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
