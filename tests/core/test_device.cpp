#include "core/device.h"
#include "core/dtype.h"
#include "support/test_support.h"

using namespace ember;

TEST_CASE("device: parse and print") {
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(1).str() == "cuda:1");
  CHECK_THROWS_WITH(parse_device("gpu"), Catch::Contains("expected 'cpu', 'cuda' or 'cuda:N', got 'gpu'"));
  CHECK_THROWS_AS(parse_device("cuda:x"), Error);
}

TEST_CASE("dtype: names and sizes") {
  CHECK(dtype_name(DType::f32) == "f32");
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::boolean) == 1);
  CHECK(is_floating(DType::f32));
  CHECK_FALSE(is_floating(DType::i64));
  CHECK_THROWS_WITH(dispatch_float(DType::i64, "exp", [](auto) { return 0; }),
                    "exp: expected a floating dtype (f32 or f64), got i64");
}
