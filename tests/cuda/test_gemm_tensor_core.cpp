// The tensor-core GEMM (ops/cuda/gemm_tensor_core.h) against an f64 reference on the same
// (already rounded) bf16 / f16 inputs, for odd shapes, transposed and padded operands and
// batches. On the simulator (both execution modes) in CI; built in every CUDA mode, so
// .ci/gpu-check runs it on a GPU too.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/runtime.h"
#include "device_buffer.h"
#include "element_bits.h"
#include "ops/cuda/gemm_tensor_core.h"
#include "support/test_support.h"
#if defined(EMBER_CUDA_SIM)
#include "sim_execution.h"
#endif

namespace cuda = ember::cuda;
using ember::DType;
using ember::testing::decode_element;
using ember::testing::DeviceBuffer;

namespace {

template <class Body>
void for_each_execution(Body body) {
#if defined(EMBER_CUDA_SIM)
  ember::testing::for_each_sim_execution(body);
#else
  body();
#endif
}

struct Problem {
  std::string name;
  int64_t batch, m, n, k;
  bool a_transposed = false, b_transposed = false, b_broadcast = false;
  int64_t pad = 0;  // extra elements per stored row of both operands
};

// One operand (rows x cols per batch item) in its layout; padding holds NaN, which a kernel that
// reads past a row would carry into c.
struct HostOperand {
  std::vector<uint16_t> data;
  int64_t ld, batch_stride;
  bool transposed;
  double at(int64_t item, int64_t r, int64_t c, bool bf16) const {
    return decode_element(bf16, data[size_t(item * batch_stride + (transposed ? c * ld + r : r * ld + c))]);
  }
};

HostOperand make_operand(int64_t items, int64_t rows, int64_t cols, bool transposed, int64_t pad, bool bf16,
                         std::mt19937& gen) {
  const int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  const int64_t ld = stored_cols + pad, matrix = stored_rows * ld;
  const uint16_t nan = bf16 ? 0x7fc0 : 0x7e00;
  HostOperand op{std::vector<uint16_t>(size_t(std::max<int64_t>(1, items * matrix)), nan), ld, matrix, transposed};
  for (int64_t item = 0; item < items; ++item)
    for (int64_t r = 0; r < stored_rows; ++r)
      for (int64_t c = 0; c < stored_cols; ++c)
        op.data[size_t(item * matrix + r * ld + c)] = ember::testing::random_element(bf16, gen, 4);
  return op;
}

void check_problem(const Problem& p, DType element) {
  const bool bf16 = element == DType::bf16;
  INFO(p.name << " (" << p.batch << " x " << p.m << " x " << p.n << " x " << p.k << "), "
              << (bf16 ? "bf16" : "f16"));
  std::mt19937 gen(uint32_t(p.m * 131 + p.n * 17 + p.k));
  const HostOperand a = make_operand(p.batch, p.m, p.k, p.a_transposed, p.pad, bf16, gen);
  const HostOperand b = make_operand(p.b_broadcast ? 1 : p.batch, p.k, p.n, p.b_transposed, p.pad, bf16, gen);
  DeviceBuffer<uint16_t> a_dev(a.data), b_dev(b.data);
  DeviceBuffer<float> c_dev(std::vector<float>(size_t(std::max<int64_t>(1, p.batch * p.m * p.n)), NAN));
  const cuda::GemmShape shape{.batch = p.batch, .m = p.m, .n = p.n, .k = p.k};
  cuda::gemm_tensor_core(element, shape, {a_dev.get(), a.ld, a.transposed, a.batch_stride},
                         {b_dev.get(), b.ld, b.transposed, p.b_broadcast ? 0 : b.batch_stride}, c_dev.get());
  const std::vector<float> c = c_dev.download();
  // Note [mma numerics] in cuda/mma.h: within (k + 1) * 2^-23 * sum |a b| of the exact value.
  int64_t bad = 0;
  for (int64_t item = 0; item < p.batch; ++item)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t kk = 0; kk < p.k; ++kk) {
          const double product = a.at(item, i, kk, bf16) * b.at(p.b_broadcast ? 0 : item, kk, j, bf16);
          exact += product;
          magnitude += std::fabs(product);
        }
        const double got = c[size_t((item * p.m + i) * p.n + j)];
        if (!(std::fabs(got - exact) <= double(p.k + 1) * std::ldexp(magnitude, -23))) {
          if (bad++ < 5) UNSCOPED_INFO("c[" << item << "][" << i << "][" << j << "] = " << got << ", expected " << exact);
        }
      }
  CHECK(bad == 0);
}

const Problem kProblems[] = {
    {"one element", 1, 1, 1, 1},
    {"smaller than one mma tile", 1, 5, 3, 7},
    {"exactly one block tile", 1, 64, 64, 32},
    {"odd edges in m, n and k", 1, 65, 70, 47},
    {"several blocks, partial everywhere", 1, 130, 129, 65},
    {"k over several steps with a ragged end", 1, 33, 17, 100},
    {"a transposed", 1, 37, 41, 29, true, false},
    {"b transposed, padded rows", 1, 29, 45, 51, false, true, false, 3},
    {"both transposed, batch of 3", 3, 21, 19, 35, true, true},
    {"batch of 2, b broadcast, padded", 2, 40, 24, 18, false, false, true, 5},
};

}  // namespace

TEST_CASE("gemm_tensor_core matches an f64 reference on odd shapes and layouts, bf16 and f16") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  for_each_execution([&] {
    for (const Problem& p : kProblems)
      for (DType element : {DType::bf16, DType::f16}) check_problem(p, element);
  });
}

TEST_CASE("gemm_tensor_core: k == 0 writes zeros, empty problems launch nothing, wrong dtypes are refused") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  DeviceBuffer<uint16_t> a(std::vector<uint16_t>(64, 0x3f80)), b(std::vector<uint16_t>(64, 0x3f80));
  DeviceBuffer<float> c(std::vector<float>(12, NAN));
  cuda::gemm_tensor_core(DType::bf16, {.batch = 1, .m = 3, .n = 4, .k = 0}, {a.get(), 1}, {b.get(), 4}, c.get());
  CHECK(c.download() == std::vector<float>(12, 0.0f));
  cuda::gemm_tensor_core(DType::f16, {.batch = 1, .m = 0, .n = 4, .k = 5}, {a.get(), 5}, {b.get(), 4}, c.get());
  cuda::gemm_tensor_core(DType::f16, {.batch = 0, .m = 3, .n = 4, .k = 5}, {a.get(), 5}, {b.get(), 4}, c.get());
  CHECK(c.download() == std::vector<float>(12, 0.0f));
  REQUIRE_THROWS_WITH(
      cuda::gemm_tensor_core(DType::f32, {.batch = 1, .m = 3, .n = 4, .k = 5}, {a.get(), 5}, {b.get(), 4}, c.get()),
      Catch::Matchers::Contains("gemm_tensor_core: expected bf16 or f16 operands, got f32"));
}
