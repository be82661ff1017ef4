// bf16 and f16 on the cuda device (the simulator in CI): conversions, the elementwise kernels
// and the reductions compute in f32 and round once, so they equal the CPU's bit for bit; the
// ops with the f32 fallback (softmax, losses, GEMMs) follow the CPU within f32 summation order.
#include "cuda/runtime.h"
#include "cuda_ops_support.h"
#include "ops/kernels.h"

using namespace ember;
using test::kCuda;
using test::on_cuda;

namespace {

Generator gen(77);

// Widening is exact, so comparing f32 copies compares the 16-bit values.
void check_same_values(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.is_cuda());
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.shape() == expected.shape());
  CHECK(got.cpu().to(DType::f32).to_vector<float>() == expected.to(DType::f32).to_vector<float>());
}

// exp and gelu: the simulator computes them as the CPU does (Note [Host exp and tanh]), but a GPU
// takes CUDA's expf and erff, which may differ from the host's by an f32 ulp or two, and so round
// to the neighbouring 16-bit value where the f32 result lies next to a tie: one unit apart at most.
void check_within_one_unit(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.is_cuda());
  REQUIRE(got.dtype() == expected.dtype());
  if (cuda::backend_name() == "simulator") return check_same_values(got, expected);
  const double unit = got.dtype() == DType::bf16 ? 0x1p-7 : 0x1p-10;  // relative spacing, at most
  test::check_close(got.cpu().to(DType::f32), expected.to(DType::f32), unit, 1e-7);
}

}  // namespace

TEST_CASE("cuda: bf16 and f16 conversions, elementwise ops and reductions equal the CPU's", "[cuda][f16]") {
  const Tensor a32 = randn({9, 37}, {}, &gen), b32 = add(abs(randn({37}, {}, &gen)), 0.5);
  for (DType low : {DType::bf16, DType::f16}) {
    INFO(dtype_name(low));
    const Tensor a = a32.to(low), b = b32.to(low);
    check_same_values(a32.to(kCuda).to(low), a);                 // f32 -> 16-bit on the device
    CHECK(a.to(kCuda).to(DType::f32).cpu().to_vector<float>() == a.to(DType::f32).to_vector<float>());
    for (test::Layout layout : test::kLayouts) {
      const Tensor ad = on_cuda(a, layout);
      check_within_one_unit(exp(ad), exp(a));
      check_within_one_unit(gelu(ad), gelu(a));
      check_same_values(relu(ad), relu(a));
      check_same_values(div(ad, on_cuda(b)), div(a, b));
      check_same_values(mul(ad, 0.5), mul(a, 0.5));
      CHECK(lt(ad, on_cuda(b)).cpu().to_vector<bool>() == lt(a, b).to_vector<bool>());
      check_same_values(amax(ad, {1}), amax(a, {1}));
      CHECK(argmax(ad, 1).cpu().to_vector<int64_t>() == argmax(a, 1).to_vector<int64_t>());
    }
    // Sums accumulate in f32 here and in double on the CPU: equal after rounding to 16 bits for
    // these sizes, except where a sum lies next to a rounding tie.
    test::check_close(sum(on_cuda(a), {1}).cpu().to(DType::f32), sum(a, {1}).to(DType::f32), 8e-3, 1e-3);
    test::check_close(sum(on_cuda(a), {0}).cpu().to(DType::f32), sum(a, {0}).to(DType::f32), 8e-3, 1e-3);
    // A mean rounds once on both (ReduceOp::mean): the bf16 case whose sum rounded first differs.
    if (low == DType::bf16) {
      const Tensor x = tensor<float>({2.171875f, -8.875f, 1.0390625f}).to(low);
      CHECK(mean(on_cuda(x)).cpu().to(DType::f32).to_vector<float>() == std::vector<float>{-1.890625f});
    }
    test::check_close(mean(on_cuda(a), {1}).cpu().to(DType::f32), mean(a, {1}).to(DType::f32), 8e-3, 1e-3);
    check_same_values(full({5}, 0.1, {.dtype = low, .device = kCuda}), full({5}, 0.1, {.dtype = low}));
    check_same_values(arange(0, 9, 1, {.dtype = low, .device = kCuda}), arange(0, 9, 1, {.dtype = low}));
  }
}

TEST_CASE("cuda: bf16 softmax, cross-entropy and GEMMs follow the CPU", "[cuda][f16]") {
  const Tensor logits = randn({8, 5}, {}, &gen).to(DType::bf16);
  const Tensor target = tensor<int64_t>({0, 1, 2, 3, 4, 0, 1, 2});
  test::check_close(softmax(on_cuda(logits), 1).cpu().to(DType::f32), softmax(logits, 1).to(DType::f32), 8e-3, 1e-6);
  test::check_close(cross_entropy(on_cuda(logits), target.to(kCuda)).cpu().to(DType::f32),
                    cross_entropy(logits, target).to(DType::f32), 8e-3, 1e-6);
  const Tensor a = randn({7, 40}, {}, &gen).to(DType::bf16), b = randn({40, 5}, {}, &gen).to(DType::bf16);
  test::check_close(matmul(on_cuda(a), on_cuda(b)).cpu().to(DType::f32), matmul(a, b).to(DType::f32), 8e-3, 2e-2);
}
