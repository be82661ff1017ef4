// How a loss combines its per-element values.
//
//   Tensor l = cross_entropy(logits, labels, Reduction::sum);
#pragma once

#include <string_view>

namespace ember {

enum class Reduction {
  none,  // one loss per element, in the target's shape
  mean,  // sum over the elements that count, divided by their number
  sum,
};

inline std::string_view reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
  }
  return "?";
}

}  // namespace ember
