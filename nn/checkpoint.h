// Tensors and training checkpoints in safetensors files (core/safetensors.h underneath).
//
//   save_tensors("mlp.safetensors", model->state_dict(), {{"format", "pt"}});
//   model->load_state_dict(load_tensors("mlp.safetensors"));
//
//   TrainingCheckpoint ck;                       // one file holds everything --resume needs
//   ck.model = model->state_dict();  ck.optimizer = opt.state_dict();  ck.scheduler = sched.state_dict();
//   ck.grad_scaler = scaler.state_dict();        // optional: mixed precision (nn/grad_scaler.h)
//   ck.epoch = epoch;  ck.step = step;  ck.config = config.dump();
//   ck.rng["default"] = rng_state(default_generator());
//   save_checkpoint("run/last.safetensors", ck);
//   TrainingCheckpoint back = load_checkpoint("run/last.safetensors");
//
// File layout of a training checkpoint: tensors "model.<name>", "optimizer.<name>",
// "scheduler.<name>", "grad_scaler.<name>" (Note [Optional sections]); __metadata__ (all strings, as safetensors requires):
//   "format":   "ember.training_checkpoint.v1"
//   "progress": JSON {"epoch": 3, "step": 1406, "counters": {"loader.batch": 12, ...}}
//   "rng":      JSON {"default": {"seed": "42", "offset": "1234"}, ...}   (uint64 as decimal strings:
//               JSON integers are int64 here and in most readers)
//   "config":   the run's configuration, JSON text
//   "history":  JSON array, what the app recorded per finished epoch (optional: a file from
//               before it loads with "[]"; older readers ignore the entry)
// Any reader with json + numpy can open it (tests/data/read_with_numpy.py).
//
// Note [Optional sections]: a section is a name prefix, and an empty section writes no tensor,
// so a section that only some runs have (grad_scaler: only runs with loss scaling) needs no
// format change: a file written before the section existed loads with it empty, and the
// caller decides what an empty section means (a fresh GradScaler, for a run that switches
// mixed precision on at resume). Readers older than a section refuse a file that has it,
// naming the tensor ("belongs to no section").
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/rng.h"
#include "core/safetensors.h"
#include "nn/state_dict.h"

namespace ember {

// Writes (atomically) every tensor, moved to the CPU and made contiguous first.
void save_tensors(const std::string& path, const StateDict& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// Reads every tensor onto the CPU; the file's metadata goes to `metadata` when given.
// Every safetensors dtype ember knows loads, BF16 and F16 included.
StateDict load_tensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);
// One raw safetensors entry as a CPU tensor (a copy); `what` names the source in errors.
Tensor tensor_from_safetensors(const SafetensorsTensor& entry, const std::string& what);

struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  friend bool operator==(const RngState&, const RngState&) = default;
};
RngState rng_state(const Generator& gen);
void restore_rng(Generator& gen, const RngState& state);

struct TrainingCheckpoint {
  StateDict model, optimizer, scheduler;
  StateDict grad_scaler;  // empty when the run has no (enabled) GradScaler
  int64_t epoch = 0;
  int64_t step = 0;
  std::map<std::string, RngState> rng;      // "default", "loader", ...
  std::map<std::string, int64_t> counters;  // anything else a resume needs ("loader.batch", ...)
  std::string config = "{}";                // JSON text
  // JSON text, an array: what the app recorded after each epoch so far (its run log), so that a
  // resumed run's CSV and curves cover the whole run. Checkpoints from before it read as "[]".
  std::string history = "[]";
  std::string source;                       // the file load_checkpoint read, for errors
};

void save_checkpoint(const std::string& path, const TrainingCheckpoint& checkpoint);
// Validates the layout above (every field's kind; epoch, step and counters non-negative);
// errors name the file, the field and what was expected.
TrainingCheckpoint load_checkpoint(const std::string& path);
// A generator or counter a resume needs; one the checkpoint lacks is an Error naming the file.
// The two halves of the __metadata__ (nn/checkpoint_metadata.cpp): the entries save_checkpoint
// writes for `checkpoint`'s non-tensor fields (its config must be JSON); the format check, and
// those fields read back into `checkpoint`, validated as load_checkpoint does (`path` names the
// file in errors).
std::map<std::string, std::string> checkpoint_metadata(const TrainingCheckpoint& checkpoint);
void check_checkpoint_format(const std::map<std::string, std::string>& metadata, const std::string& path);
void read_checkpoint_metadata(const std::map<std::string, std::string>& metadata, const std::string& path,
                              TrainingCheckpoint& checkpoint);
const RngState& checkpoint_rng(const TrainingCheckpoint& checkpoint, const std::string& name);
int64_t checkpoint_counter(const TrainingCheckpoint& checkpoint, const std::string& name);

}  // namespace ember
