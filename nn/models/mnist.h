// The MNIST models: small networks for 28x28 single-channel images.
//
//   auto net = mlp({784, 256, 128, 10});   // Linear-ReLU-Linear-ReLU-Linear, flattens its input
//   Tensor logits = (*net)(images);        // (N, 1, 28, 28) -> (N, 10)
//
//   auto cnn = mnist_cnn();                  // the comparison model of `ember bench mnist`
//   auto embed = mnist_embedding_net(128);   // (N, 1, 28, 28) -> (N, 128), for metric learning
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/sequential.h"

namespace ember {

// Flatten, then Linear layers of the given sizes with ReLU between them (none after the
// last). sizes = {in, hidden..., out}, at least two entries.
std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes, Generator* gen = nullptr);

// (N, 1, 28, 28) -> (N, 10): conv 1->16 3x3 pad 1, ReLU, max-pool 2, conv 16->32 3x3 pad 1,
// ReLU, max-pool 2, flatten (1568), fc 1568->128, ReLU, fc 128->10.
std::shared_ptr<Sequential> mnist_cnn(Generator* gen = nullptr);
// mnist_cnn with its classifier fc 128->10 replaced by a linear embedding fc 128->dim:
// (N, 1, 28, 28) -> (N, dim), unnormalised (metric losses normalise themselves).
std::shared_ptr<Sequential> mnist_embedding_net(int64_t dim, Generator* gen = nullptr);
// LeNet-5 with ReLU and max-pooling: conv 1->6 5x5 pad 2, ReLU, pool 2, conv 6->16 5x5, ReLU,
// pool 2, fc 400->120, ReLU, fc 120->84, ReLU, fc 84->10.
std::shared_ptr<Sequential> lenet5(Generator* gen = nullptr);
// "mnist_cnn", "lenet5" or "mlp" (784-256-128-10) for 28x28 single-channel images.
std::shared_ptr<Sequential> make_mnist_model(const std::string& name, Generator* gen = nullptr);

}  // namespace ember
