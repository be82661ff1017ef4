// What a training step of mnist_cnn spends outside its kernels (issue #11: small-batch steps
// should be dominated by arithmetic, not by per-op overhead): the fixed cost of one op (dispatch,
// checks, allocation, a 1-element kernel), of recording it for autograd, of an allocation and of
// a pool wake, measured on tiny tensors, and how many ops a step records, so that the overhead's
// share of a step follows (Note [Per-op overhead] in op_overhead.cpp).
#pragma once

#include <cstdint>
#include <ostream>

namespace ember::bench {

struct OpOverhead {
  double plain_us = 0;       // add of two 1-element tensors, no autograd
  double recorded_us = 0;    // the same add with inputs that require grad (a node is recorded)
  double allocation_us = 0;  // Tensor::empty of 1 element (the caching allocator and the Tensor)
  double pool_us = 0;        // parallel_for of 2 items, empty body, on the current thread count
  double step_ms = 0;        // one SGD step of mnist_cnn (forward, backward, update) at `batch`
  int64_t recorded_ops = 0;  // autograd nodes one step's forward records
  // The step's overhead by this model: a recorded op per node and a plain op per node's backward.
  double step_overhead_us() const { return double(recorded_ops) * (recorded_us + plain_us); }
};

OpOverhead measure_op_overhead(int64_t batch);

// Prints the measurement as a paragraph under `ember bench mnist`'s table.
void report_op_overhead(std::ostream& out, int64_t batch);

}  // namespace ember::bench
