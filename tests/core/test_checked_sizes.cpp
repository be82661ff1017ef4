// Sizes that do not fit in int64 are errors, never wrapped counts (Note [Checked sizes] in
// core/shape.h); null data is an error, not a dereference.
#include "support/test_support.h"

using namespace ember;
using Catch::Contains;

TEST_CASE("checked sizes: a shape whose numel overflows int64 is an error", "[tensor][sizes]") {
  // (2^62 + 1) x 4 wraps to 4 in unchecked int64 arithmetic.
  REQUIRE_THROWS_WITH(zeros({(int64_t(1) << 62) + 1, 4}), Contains("more than 2^63 elements"));
  REQUIRE_THROWS_WITH(empty({int64_t(1) << 32, int64_t(1) << 32}), Contains("empty: shape"));
  CHECK(numel_of({0, int64_t(1) << 62, int64_t(1) << 62}) == 0);  // empty: no product to overflow
}

TEST_CASE("checked sizes: a numel that fits but whose bytes do not is an error", "[tensor][sizes]") {
  // 2^61 f32 elements are 2^63 bytes.
  REQUIRE_THROWS_WITH(empty({int64_t(1) << 61}, {.dtype = DType::f32}), Contains("overflows 64-bit"));
}

TEST_CASE("checked sizes: views and reshapes check their shapes too", "[tensor][sizes]") {
  Tensor x = zeros({1, 4});
  REQUIRE_THROWS_WITH(expand(x, {(int64_t(1) << 62) + 1, 4}), Contains("more than 2^63 elements"));
  REQUIRE_THROWS_AS(reshape(x, {int64_t(1) << 62, int64_t(1) << 62, 0, -1}), Error);
  REQUIRE_THROWS_AS(reshape(x, {(int64_t(1) << 62) + 1, 4}), Error);
  REQUIRE_THROWS_AS(numel_of({2, -3}), Error);
}

TEST_CASE("from_data: null data is an error unless the shape is empty", "[tensor][sizes]") {
  REQUIRE_THROWS_WITH(from_data(nullptr, {3}, DType::f32), Contains("from_data: data is null"));
  CHECK(from_data(nullptr, {0, 3}, DType::f32).numel() == 0);
}
