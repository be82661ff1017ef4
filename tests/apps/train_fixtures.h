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

// Image folders for `train seresnext`: dir/<train|val>/c<k>/<i>.png, 16x16 RGB, class k a
// bright horizontal bar at rows 2k + 2..2k + 3 (flips keep the class), `per_class` images per
// class and split, a little noise.
constexpr int64_t kBarClasses = 6;
void write_bar_folders(const TempDir& dir, int per_class);

// Catch checks that `a` and `b` hold the same names, shapes and bytes.
void check_bitwise_equal(const StateDict& a, const StateDict& b);

}  // namespace ember::test
