// Ready-made models.
//
//   auto net = mlp({784, 256, 128, 10});   // Linear-ReLU-Linear-ReLU-Linear, flattens its input
//   Tensor logits = (*net)(images);        // (N, 1, 28, 28) -> (N, 10)
//
// mnist_cnn and lenet5 come with the conv/pool layers.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/sequential.h"

namespace ember {

// Flatten, then Linear layers of the given sizes with ReLU between them (none after the
// last). sizes = {in, hidden..., out}, at least two entries.
std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes, Generator* gen = nullptr);

}  // namespace ember
