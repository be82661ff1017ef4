// Random and creation kernels on cuda (ops/cuda/fill.cu): for one seed the same numbers as
// the CPU (Note [Philox layout]): uniforms and integers bitwise, normals within 1e-6.
#include "cuda_ops_support.h"

using namespace ember;
using test::check_equal;
using test::kCuda;

TEST_CASE("cuda: rand and uniform equal the CPU's bitwise for one seed (f32, f64, odd sizes, offsets)") {
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t n : {1, 3, 5, 1001}) {
      INFO(dtype_name(dt) << " n=" << n);
      Generator g_cpu(99), g_cuda(99);
      rand({7}, {.dtype = dt}, &g_cpu);  // a non-zero offset
      rand({7}, {.dtype = dt, .device = kCuda}, &g_cuda);
      REQUIRE(g_cpu.offset() == g_cuda.offset());
      Tensor a = uniform({n}, -3.0, 5.0, {.dtype = dt}, &g_cpu);
      Tensor b = uniform({n}, -3.0, 5.0, {.dtype = dt, .device = kCuda}, &g_cuda);
      if (dt == DType::f32) check_equal<float>(b, a);
      else check_equal<double>(b, a);
    }
  }
}

TEST_CASE("cuda: randn equals the CPU's within 1e-6 for one seed") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    Generator g_cpu(5), g_cuda(5);
    Tensor a = normal({3, 333}, 1.5, 2.0, {.dtype = dt}, &g_cpu);
    Tensor b = normal({3, 333}, 1.5, 2.0, {.dtype = dt, .device = kCuda}, &g_cuda);
    test::check_matches(b, a, 0, 1e-6);
    // The values are a normal sample, not zeros: a test that can fail.
    CHECK(std::abs(a.mean().item() - 1.5) < 0.2);
  }
}

TEST_CASE("cuda: randint equals the CPU's exactly (i64, i32), and the default generator advances alike") {
  Generator g_cpu(11), g_cuda(11);
  check_equal<int64_t>(randint(-5, 1000, {257}, {.dtype = DType::i64, .device = kCuda}, &g_cuda),
                       randint(-5, 1000, {257}, {.dtype = DType::i64}, &g_cpu));
  check_equal<int32_t>(randint(0, 3, {9}, {.dtype = DType::i32, .device = kCuda}, &g_cuda),
                       randint(0, 3, {9}, {.dtype = DType::i32}, &g_cpu));
  manual_seed(3);
  Tensor a = rand({10});
  manual_seed(3);
  Tensor b = rand({10}, {.device = kCuda});
  check_equal<float>(b, a);
}

TEST_CASE("cuda: arange and linspace equal the CPU's") {
  for (DType dt : {DType::f32, DType::f64, DType::i64, DType::i32, DType::u8}) {
    INFO(dtype_name(dt));
    test::check_close(arange(0, 300, 1.0, {.dtype = dt, .device = kCuda}), arange(0, 300, 1.0, {.dtype = dt}), 0, 0);
  }
  test::check_matches(arange(-1.0, 2.0, 0.01, {.dtype = DType::f64, .device = kCuda}),
                      arange(-1.0, 2.0, 0.01, {.dtype = DType::f64}), 1e-15, 1e-15);
  test::check_matches(linspace(-2.0, 3.0, 77, {.device = kCuda}), linspace(-2.0, 3.0, 77), 0, 0);
}
