#include "nn/state_dict.h"

namespace ember {

StateDict sub_state_dict(const StateDict& dict, const std::string& prefix) {
  StateDict out;
  for (auto it = dict.lower_bound(prefix); it != dict.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    out.emplace(it->first.substr(prefix.size()), it->second);
  return out;
}

void add_prefixed(StateDict& into, const std::string& prefix, const StateDict& from) {
  for (const auto& [name, t] : from) into[prefix + name] = t;
}

}  // namespace ember
