// The f32 GEMM on a prepacked op(B) (ops/cpu/gemm_prepacked.h, Note [Prepacked B]): every block
// of the packed matrix that a caller may take (K ranges from any row, column ranges from any
// aligned column, up to and short of the end, over several KC blocks of K) gives the very bits
// of ember's packed GEMM (what cpu::gemm<float> runs unless EMBER_GEMM=eigen) on the same block,
// for every transposition, alpha and beta, on one thread and on the pool, down to operands of less
// than one panel; a misaligned block is an Error. Likewise a prepacked op(A) (Note [Prepacked
// A]) against cpu::gemm on the same operands, epilogue included.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_packed.h"
#include "ops/cpu/gemm_prepacked.h"
#include "gemm_reference.h"
#include "support/test_support.h"

using namespace ember;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) { return test::gemm_test_values(n, seed); }

// C = 0.5 op(A) op(B) + beta C by ember's packed GEMM, the kernel and blocking cpu::gemm uses.
void ember_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  using namespace cpu::gemm_detail;
  gemm_packed(default_micro_kernel(), cache_blocking(), trans_a, trans_b, M, N, K, 0.5f, A, lda, B, ldb, beta, C, ldc,
              Activation::none);
}

}  // namespace

TEST_CASE("cpu::gemm_packed_b equals cpu::gemm bit for bit on every block of the packed operand",
          "[gemm][prepacked]") {
  // K over two KC blocks; N past three 48-column panels; M N K over the GEMM's one-thread limit.
  const int64_t K = 600, N = 150, M = 131;
  const int64_t align = cpu::packed_b_column_alignment();
  REQUIRE(align == 48);
  struct Block {
    int64_t k0, k, n0, n;
  };
  const Block blocks[] = {{0, K, 0, N}, {0, 1, 0, 1}, {5, 300, align, N - align}, {299, 301, 2 * align, 7},
                          {17, 40, 3 * align, N - 3 * align}, {0, K, align, align}};
  const int previous = num_threads();
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const bool trans_b : {false, true}) {
      const int64_t ldb = (trans_b ? K : N) + 3;
      const std::vector<float> b = random_values(size_t((trans_b ? N : K) * ldb), 2);
      const cpu::PackedB packed = cpu::pack_b(trans_b, K, N, b.data(), ldb);
      for (const bool trans_a : {false, true})
        for (const Block& blk : blocks)
          for (const float beta : {0.0f, 1.0f}) {
            INFO("threads " << threads << " trans_a " << trans_a << " trans_b " << trans_b << " block k " << blk.k0
                            << "+" << blk.k << " n " << blk.n0 << "+" << blk.n << " beta " << beta);
            const int64_t lda = (trans_a ? M : blk.k) + 2, ldc = blk.n + 4;
            const std::vector<float> a = random_values(size_t((trans_a ? blk.k : M) * lda), 1);
            std::vector<float> want = random_values(size_t(M * ldc), 3), got = want;
            // op(B)'s block as cpu::gemm reads it: rows k0.., columns n0.. of op(B).
            const float* b_block = trans_b ? b.data() + blk.n0 * ldb + blk.k0 : b.data() + blk.k0 * ldb + blk.n0;
            ember_gemm(trans_a, trans_b, M, blk.n, blk.k, a.data(), lda, b_block, ldb, beta, want.data(), ldc);
            cpu::gemm_packed_b(trans_a, M, blk.n, blk.k, 0.5f, a.data(), lda, packed, blk.k0, blk.n0, beta,
                               got.data(), ldc);
            REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
          }
    }
  }
  set_num_threads(previous);
}

TEST_CASE("cpu::gemm_packed_b on an operand of less than one panel, with K under the transpose's 8",
          "[gemm][prepacked]") {
  for (const bool trans_b : {false, true}) {
    const int64_t K = 5, N = 13, M = 9, ldb = trans_b ? K : N;
    const std::vector<float> b = random_values(size_t((trans_b ? N : K) * ldb), 4), a = random_values(M * K, 5);
    const cpu::PackedB packed = cpu::pack_b(trans_b, K, N, b.data(), ldb);
    std::vector<float> want(M * N), got(M * N);
    ember_gemm(false, trans_b, M, N, K, a.data(), K, b.data(), ldb, 0.0f, want.data(), N);
    cpu::gemm_packed_b(false, M, N, K, 0.5f, a.data(), K, packed, 0, 0, 0.0f, got.data(), N);
    INFO("trans_b " << trans_b);
    REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("cpu::gemm_packed_b rejects a block that is misaligned or outside the packed operand", "[gemm][prepacked]") {
  const std::vector<float> b = random_values(64 * 100, 2), a = random_values(64 * 64, 1);
  std::vector<float> c(64 * 100);
  const cpu::PackedB packed = cpu::pack_b(false, 64, 100, b.data(), 100);
  auto run = [&](int64_t k0, int64_t k, int64_t n0, int64_t n) {
    cpu::gemm_packed_b(false, 4, n, k, 1.0f, a.data(), 64, packed, k0, n0, 0.0f, c.data(), 100);
  };
  REQUIRE_NOTHROW(run(0, 64, 48, 52));
  REQUIRE_THROWS_WITH(run(0, 64, 5, 10), Catch::Contains("gemm_packed_b: expected a panel-aligned block"));
  REQUIRE_THROWS_WITH(run(0, 64, 48, 53), Catch::Contains("columns 48+53"));
  REQUIRE_THROWS_WITH(run(60, 5, 0, 10), Catch::Contains("rows 60+5"));
  REQUIRE_THROWS_WITH(run(0, 0, 0, 10), Catch::Contains("rows 0+0"));
}

TEST_CASE("cpu::gemm_packed_a equals cpu::gemm bit for bit, epilogue included", "[gemm][prepacked]") {
  struct Shape {
    int64_t M, N, K;
  };
  // Two KC blocks and a pool-sized product; a narrow last tile (49 columns); less than one
  // micro-panel of rows with K under the transpose's 8; one element.
  const Shape shapes[] = {{131, 150, 600}, {24, 49, 337}, {5, 13, 5}, {1, 1, 1}};
  const int previous = num_threads();
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Shape& sh : shapes)
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true})
          for (const float beta : {0.0f, 1.0f}) {
            INFO("threads " << threads << " M " << sh.M << " N " << sh.N << " K " << sh.K << " trans_a " << trans_a
                            << " trans_b " << trans_b << " beta " << beta);
            const int64_t lda = (trans_a ? sh.M : sh.K) + 2, ldb = (trans_b ? sh.K : sh.N) + 3, ldc = sh.N + 4;
            const std::vector<float> a = random_values(size_t((trans_a ? sh.K : sh.M) * lda), 6);
            const std::vector<float> b = random_values(size_t((trans_b ? sh.N : sh.K) * ldb), 7);
            const std::vector<float> rows = random_values(size_t(sh.M), 8), columns = random_values(size_t(sh.N), 9);
            const cpu::GemmBias<float> bias{rows.data(), columns.data()};
            std::vector<float> want = random_values(size_t(sh.M * ldc), 10), got = want;
            cpu::gemm<float>(trans_a, trans_b, sh.M, sh.N, sh.K, 1.0f, a.data(), lda, b.data(), ldb, beta, want.data(),
                             ldc, Activation::relu, bias);
            const cpu::PackedA packed = cpu::pack_a(trans_a, sh.M, sh.K, a.data(), lda);
            cpu::gemm_packed_a(packed, trans_b, sh.N, b.data(), ldb, beta, got.data(), ldc, Activation::relu, bias);
            REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
            // Inside a parallel_for, as a convolution's image tasks call it: the calling thread alone.
            std::vector<float> inline_got = random_values(size_t(sh.M * ldc), 10);
            parallel_for(0, 1, 1, [&](int64_t, int64_t) {
              cpu::gemm_packed_a(packed, trans_b, sh.N, b.data(), ldb, beta, inline_got.data(), ldc,
                                 Activation::relu, bias);
            });
            REQUIRE(std::memcmp(want.data(), inline_got.data(), want.size() * sizeof(float)) == 0);
          }
  }
  set_num_threads(previous);
}

// The bf16 twin (Note [Prepacked A], pairs of K): against cpu::gemm_bf16 on the same bits, over
// three K blocks of the bf16 blocking (KC 1024 on a 48 KiB L1), the last one odd. Only the pair
// kernels have panels, so the case asks for them (EMBER_BF16_GEMM=dot: vdpbf16ps, or the portable
// pair kernel where the CPU has no AVX512-BF16). The choice is made once per process, and CTest
// runs each case in a process of its own; run with others in one process, the case may find the
// widened or AMX form chosen already, and says so.
TEST_CASE("cpu::gemm_packed_a_bf16 equals cpu::gemm_bf16 bit for bit, epilogue included", "[gemm][prepacked][bf16]") {
  setenv("EMBER_BF16_GEMM", "dot", 1);
  const bool pairs = cpu::pack_a_bf16(false, 1, 1, std::vector<uint16_t>{0x3F80}.data(), 1).panels.defined();
  unsetenv("EMBER_BF16_GEMM");
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{131, 150, 2101}, {24, 49, 337}, {5, 13, 5}, {1, 1, 1}};
  auto bits_of = [](const std::vector<float>& v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bfloat16_bits(v[i]);
    return bits;
  };
  if (!pairs) {
    WARN("this process chose the bf16 GEMM's form before the test set EMBER_BF16_GEMM; run this case alone");
    return;
  }
  const int previous = num_threads();
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Shape& sh : shapes)
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true}) {
          INFO("threads " << threads << " M " << sh.M << " N " << sh.N << " K " << sh.K << " trans_a " << trans_a
                          << " trans_b " << trans_b);
          const int64_t lda = (trans_a ? sh.M : sh.K) + 2, ldb = (trans_b ? sh.K : sh.N) + 3, ldc = sh.N + 4;
          const std::vector<uint16_t> a = bits_of(random_values(size_t((trans_a ? sh.K : sh.M) * lda), 16));
          const std::vector<uint16_t> b = bits_of(random_values(size_t((trans_b ? sh.N : sh.K) * ldb), 17));
          const std::vector<float> rows = random_values(size_t(sh.M), 18), columns = random_values(size_t(sh.N), 19);
          const cpu::GemmBias<float> bias{rows.data(), columns.data()};
          std::vector<float> want = random_values(size_t(sh.M * ldc), 20), got = want;
          cpu::gemm_bf16(sh.M, sh.N, sh.K, 1.0f, cpu::gemm_operand(a.data(), lda, trans_a),
                         cpu::gemm_operand(b.data(), ldb, trans_b), 0.5f, want.data(), ldc, Activation::relu, bias);
          const cpu::PackedA packed = cpu::pack_a_bf16(trans_a, sh.M, sh.K, a.data(), lda);
          REQUIRE(packed.panels.defined());
          cpu::gemm_packed_a_bf16(packed, trans_b, sh.N, b.data(), ldb, 0.5f, got.data(), ldc, Activation::relu, bias);
          REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
        }
  }
  set_num_threads(previous);
}
