// Gradient clipping by total norm, as torch.nn.utils.clip_grad_norm_.
//
//   loss.backward();
//   double norm = clip_grad_norm_(model->parameters(), /*max_norm=*/1.0);
//   opt.step();
#pragma once

#include <limits>
#include <vector>

#include "core/tensor.h"

namespace ember {

// The p-norm of all gradients together (as if concatenated; p = infinity allowed). When it
// exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6). Parameters without
// a gradient are skipped. Returns the norm before clipping.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

}  // namespace ember
