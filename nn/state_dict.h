// StateDict: named tensors, the unit in which modules, optimizers and schedulers save and
// restore themselves ("features.0.weight" -> Tensor). Checkpoints (nn/checkpoint.h) store one
// or several of them in a safetensors file.
//
//   StateDict sd = model.state_dict();
//   save_tensors("model.safetensors", sd);
//   model.load_state_dict(load_tensors("model.safetensors"));
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"

namespace ember {

using StateDict = std::map<std::string, Tensor>;

// The entries of `dict` whose names start with `prefix`, with the prefix removed.
StateDict sub_state_dict(const StateDict& dict, const std::string& prefix);
// Adds every entry of `from` to `into` under `prefix` + name.
void add_prefixed(StateDict& into, const std::string& prefix, const StateDict& from);

}  // namespace ember
