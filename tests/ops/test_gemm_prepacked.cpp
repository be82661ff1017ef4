// The f32 GEMM on a prepacked op(B) (ops/cpu/gemm_prepacked.h, Note [Prepacked B]): every block
// of the packed matrix that a caller may take (K ranges from any row, column ranges from any
// aligned column, up to and short of the end, over several KC blocks of K) gives the very bits
// of cpu::gemm on the same block, for every transposition, alpha and beta, on one thread and on
// the pool; a misaligned block is an Error.
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_prepacked.h"
#include "support/test_support.h"

using namespace ember;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {  // in [-1, 1)
    seed = seed * 1664525u + 1013904223u;
    x = float(int32_t(seed >> 8) % 1000) / 1000.0f;
  }
  return v;
}

}  // namespace

TEST_CASE("cpu::gemm_packed_b equals cpu::gemm bit for bit on every block of the packed operand",
          "[gemm][prepacked]") {
  const int64_t K = 600, N = 150, M = 37;  // K over two KC blocks; N past three 48-column panels
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
            cpu::gemm<float>(trans_a, trans_b, M, blk.n, blk.k, 0.5f, a.data(), lda, b_block, ldb, beta, want.data(),
                             ldc);
            cpu::gemm_packed_b(trans_a, M, blk.n, blk.k, 0.5f, a.data(), lda, packed, blk.k0, blk.n0, beta,
                               got.data(), ldc);
            REQUIRE(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
          }
    }
  }
  set_num_threads(previous);
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
