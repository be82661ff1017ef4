// Fixtures of the train apps' tests: a small synthetic dataset in MNIST's IDX layout (class k is
// a bright horizontal bar at row 2k + 4 plus a little noise, labels cycle 0..9), and a bitwise
// comparison of saved state.
//
//   test::TempDir dir("my_test");
//   test::write_synthetic_mnist(dir, /*n_train=*/320, /*n_test=*/100);   // then c.data = dir.path
//   test::check_bitwise_equal(load_checkpoint(a).model, load_checkpoint(b).model);
#pragma once

#include <cstdint>

#include "datasets/idx_fixtures.h"
#include "nn/state_dict.h"

namespace ember::test {

void write_synthetic_mnist(const TempDir& dir, uint32_t n_train, uint32_t n_test);

// Catch checks that `a` and `b` hold the same names, shapes and bytes.
void check_bitwise_equal(const StateDict& a, const StateDict& b);

}  // namespace ember::test
