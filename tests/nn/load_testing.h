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

}  // namespace ember::test
