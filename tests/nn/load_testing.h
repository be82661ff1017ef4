// Helpers of the load tests (concurrent inference, training soak, OOM recovery): bitwise
// comparison of tensors and of whole state dicts, a copy of a model's and optimizer's state,
// and a small synthetic classification problem to train on.
//
//   const StateDict before = test::snapshot(model->state_dict());
//   ...
//   CHECK(test::first_difference(model->state_dict(), before) == "");
#pragma once

#include <string>
#include <vector>

#include "ember.h"

namespace ember::test {

// True when `a` and `b` have the same shape, dtype and bytes (NaNs compare by bit pattern).
// Either may live on any device.
bool bitwise_equal(const Tensor& a, const Tensor& b);

// A CPU copy of every tensor of `state` (so that later in-place updates do not reach it).
StateDict snapshot(const StateDict& state);

// "" when both hold the same names with bitwise-equal tensors, else the first name that differs
// (or is missing from either side), for CHECK messages.
std::string first_difference(const StateDict& actual, const StateDict& expected);

// Random inputs (batch, features...) and class labels in [0, classes), fixed by `seed`; the
// labels are a function of the inputs (argmax of a fixed projection) so that a model can learn
// them and the loss goes down.
struct SyntheticBatch {
  Tensor x, y;
};
std::vector<SyntheticBatch> synthetic_batches(int count, const Shape& input_shape, int64_t classes, uint64_t seed);
// The same batches on `device`.
std::vector<SyntheticBatch> to_device(const std::vector<SyntheticBatch>& batches, Device device);

// (N, 1, 8, 8) -> (N, classes): conv 1->4 3x3 pad 1, ReLU, max-pool 2, flatten (64), fc 64->classes.
std::shared_ptr<Sequential> tiny_cnn(int64_t classes, Generator* gen);

// One training step as the apps run it: zero_grad, cross-entropy of model(batch.x) against
// batch.y, backward, optimizer step. Returns the loss (0-d, on the model's device).
Tensor train_step(Module& model, Optimizer& optimizer, const SyntheticBatch& batch);

}  // namespace ember::test
