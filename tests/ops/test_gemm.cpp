// ember's packed f32 GEMM (ops/cpu/gemm_packed.h) against a double-accumulated reference, for
// both micro-kernels (the AVX-512 one where this machine has it, the portable one everywhere),
// the cache-derived blocking and a tiny one that runs every loop of the nest several times;
// every transposition, alpha, beta and activation; edge sizes around the 8 x 48 tile; leading
// dimensions wider than the matrices; and results that do not depend on the thread count.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/gemm_packed.h"
#include "gemm_reference.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::cpu::gemm_detail;

namespace {

struct Shape3 {
  int64_t M, N, K;
};

std::vector<float> random_values(size_t n, uint32_t seed) { return test::gemm_test_values(n, seed); }

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
  Activation act;
  int bias = 0;  // 1: a bias per row of C, 2: per column, 3: both
  bool row_bias() const { return bias & 1; }
  bool column_bias() const { return bias & 2; }
  int64_t lda() const { return (ta ? M : K) + 3; }  // wider than the matrix
  int64_t ldb() const { return (tb ? K : N) + 2; }
  int64_t ldc() const { return N + 5; }
};

struct Operands {
  std::vector<float> a, b, c, row_bias, column_bias;
  explicit Operands(const Case& t)
      : a(random_values(size_t((t.ta ? t.K : t.M) * t.lda()), 1)),
        b(random_values(size_t((t.tb ? t.N : t.K) * t.ldb()), 2)),
        c(random_values(size_t(t.M * t.ldc()), 3)),
        row_bias(random_values(size_t(t.M), 4)),
        column_bias(random_values(size_t(t.N), 5)) {}
};

cpu::GemmBias<float> bias_of(const Case& t, const Operands& in) {
  return {t.row_bias() ? in.row_bias.data() : nullptr, t.column_bias() ? in.column_bias.data() : nullptr};
}

// Checks `got` (C after the GEMM) against the reference computed in double from `in`, and that
// the columns of C past N are untouched.
void check_against_reference(const Case& t, const Operands& in, const std::vector<float>& got, const std::string& what) {
  const float* A = in.a.data();
  const float* B = in.b.data();
  double worst = 0;
  const int64_t bad = test::GemmReference{t.M, t.N, t.K, t.ldc(), t.alpha, t.beta, t.act}.count_errors(
      [&](int64_t i, int64_t k) { return t.ta ? A[k * t.lda() + i] : A[i * t.lda() + k]; },
      [&](int64_t k, int64_t j) { return t.tb ? B[j * t.ldb() + k] : B[k * t.ldb() + j]; },
      [&](int64_t i) { return t.row_bias() ? in.row_bias[size_t(i)] : 0.0f; },
      [&](int64_t j) { return t.column_bias() ? in.column_bias[size_t(j)] : 0.0f; }, in.c, got, &worst);
  INFO(what << ": " << (t.ta ? "A^T" : "A") << " " << (t.tb ? "B^T" : "B") << " M " << t.M << " N " << t.N << " K "
            << t.K << " alpha " << t.alpha << " beta " << t.beta << " act " << int(t.act) << " bias " << t.bias
            << ", worst error " << worst);
  REQUIRE(bad == 0);
}

std::vector<float> run_packed(MicroKernel kernel, const Blocking& blocking, const Case& t, const Operands& in,
                              BRows b_rows) {
  std::vector<float> c = in.c;
  const cpu::GemmBias<float> bias = bias_of(t, in);
  gemm_packed(kernel, blocking, t.ta, t.tb, t.M, t.N, t.K, t.alpha, in.a.data(), t.lda(), in.b.data(), t.ldb(),
              t.beta, c.data(), t.ldc(), t.act, bias.rows, bias.columns, b_rows);
  return c;
}

const char* name_of(BRows b_rows) { return b_rows == BRows::in_place ? " B in place" : " B packed"; }

struct NamedKernel {
  const char* name;
  MicroKernel kernel;
};

std::vector<NamedKernel> kernels() {
  std::vector<NamedKernel> k{{"portable", portable_micro_kernel}};
  if (avx512_micro_kernel()) k.push_back({"avx512", avx512_micro_kernel()});
  return k;
}

constexpr Blocking kTiny{16, 16, 96};  // K > KC, M > MC, N > NC already at a few dozen

}  // namespace

TEST_CASE("packed GEMM matches a double reference for every transposition, alpha, beta, activation and bias",
          "[gemm]") {
  // 1, tile - 1, tile, tile + 1 and primes for M (tile 8) and N (tile 48); K = 1 and K > KC.
  const Shape3 shapes[] = {{1, 1, 1},  {7, 47, 5},  {8, 48, 16}, {9, 49, 17}, {13, 31, 1},
                           {17, 97, 37}, {33, 20, 3}, {3, 145, 40}, {24, 96, 33}};
  const float alphas[] = {1.0f, -0.5f};
  const float betas[] = {0.0f, 1.0f, 0.7f};
  const Activation acts[] = {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh};
  for (const NamedKernel& k : kernels())
    for (const Blocking& blocking : {cache_blocking(), kTiny})
      for (const Shape3& s : shapes)
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (float alpha : alphas)
              for (float beta : betas)
                for (Activation act : acts)
                  for (int bias = 0; bias < 4; ++bias) {
                    const Case t{ta, tb, s.M, s.N, s.K, alpha, beta, act, bias};
                    const Operands in(t);
                    // B^T is always packed: in_place then takes the packed path again.
                    for (BRows b_rows : {BRows::packed, BRows::in_place})
                      check_against_reference(t, in, run_packed(k.kernel, blocking, t, in, b_rows),
                                              std::string(k.name) + (blocking.kc == kTiny.kc ? " tiny blocking" : "") +
                                                  name_of(b_rows));
                  }
}

TEST_CASE("packed GEMM on tiles of 1 to 8 columns (Note [Narrow column tiles]) matches the reference", "[gemm]") {
  for (const NamedKernel& k : kernels())
    for (int64_t N : {1, 2, 3, 4, 5, 6, 7, 8, 49, 50, 51, 52, 53, 54, 55, 56, 57})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (Activation act : {Activation::none, Activation::relu, Activation::tanh})
            for (BRows b_rows : {BRows::packed, BRows::in_place}) {
              const Case t{ta, tb, 11, N, 37, -0.5f, 0.7f, act, 3};
              const Operands in(t);
              check_against_reference(t, in, run_packed(k.kernel, kTiny, t, in, b_rows),
                                      std::string(k.name) + name_of(b_rows));
            }
}

TEST_CASE("packed GEMM gives the same bits with B packed or read in place", "[gemm]") {
  const Shape3 shapes[] = {{32, 3136, 288}, {40, 100, 700}, {8, 47, 3}};
  for (const NamedKernel& k : kernels())
    for (const Shape3& s : shapes) {
      const Case t{false, false, s.M, s.N, s.K, 1.0f, 0.5f, Activation::relu, 3};
      const Operands in(t);
      INFO(k.name << " M " << s.M << " N " << s.N << " K " << s.K);
      REQUIRE(run_packed(k.kernel, cache_blocking(), t, in, BRows::packed) ==
              run_packed(k.kernel, cache_blocking(), t, in, BRows::in_place));
    }
}

TEST_CASE("packed GEMM reading B in place reads nothing past B's last row", "[gemm]") {
  // B (K, N) tight (ldb == N) and ending at a page that may not be read: a kernel that loads a
  // whole vector past column N of the last row faults.
  const int64_t page = sysconf(_SC_PAGESIZE);
  for (const NamedKernel& k : kernels())
    // Narrow tiles (1-8 columns), masked last vectors, and whole vectors that end at N exactly.
    for (int64_t N : {1, 2, 5, 8, 15, 16, 17, 32, 40, 47, 48, 49, 56, 64, 95}) {
      const int64_t K = 3, M = 9, b_bytes = K * N * int64_t(sizeof(float));
      const int64_t pages = (b_bytes + page - 1) / page;
      char* region = static_cast<char*>(
          mmap(nullptr, size_t((pages + 1) * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      REQUIRE(region != MAP_FAILED);
      REQUIRE(mprotect(region + pages * page, size_t(page), PROT_NONE) == 0);
      float* B = reinterpret_cast<float*>(region + pages * page - b_bytes);
      const std::vector<float> b = random_values(size_t(K * N), 2), a = random_values(size_t(M * K), 1);
      std::copy(b.begin(), b.end(), B);
      std::vector<float> in_place(size_t(M * N)), packed(size_t(M * N));
      gemm_packed(k.kernel, cache_blocking(), false, false, M, N, K, 1.0f, a.data(), K, B, N, 0.0f, in_place.data(),
                  N, Activation::none, nullptr, nullptr, BRows::in_place);
      gemm_packed(k.kernel, cache_blocking(), false, false, M, N, K, 1.0f, a.data(), K, B, N, 0.0f, packed.data(), N,
                  Activation::none, nullptr, nullptr, BRows::packed);
      munmap(region, size_t((pages + 1) * page));
      INFO(k.name << " N " << N);
      REQUIRE(in_place == packed);
    }
}

TEST_CASE("packed GEMM with beta 0 never reads C", "[gemm]") {
  for (const NamedKernel& k : kernels()) {
    const Case t{false, false, 9, 50, 7, 1.0f, 0.0f, Activation::relu};
    Operands in(t);
    std::vector<float> c(in.c.size(), NAN);
    gemm_packed(k.kernel, kTiny, t.ta, t.tb, t.M, t.N, t.K, t.alpha, in.a.data(), t.lda(), in.b.data(), t.ldb(),
                t.beta, c.data(), t.ldc(), t.act);
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < t.N; ++j) REQUIRE(std::isfinite(c[size_t(i * t.ldc() + j)]));
  }
}

TEST_CASE("cpu::gemm<float> on large and skinny shapes matches the reference and Eigen, for any thread count",
          "[gemm][threads]") {
  const int previous = num_threads();
  // Past the cache blocking in every direction, and the convolution shapes' skinny sides.
  // 120 rows: B packed per micro-panel (Note [B packed per micro-panel]) in one row block on one
  // thread. Two threads take halves of C (Note [GEMM in halves]): of rows, and of columns for 20
  // rows; three share the loop nest's work items.
  const Shape3 shapes[] = {{300, 260, 600}, {1100, 37, 70}, {20, 4200, 30}, {64, 196, 576}, {120, 150, 700}};
  for (const Shape3& s : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Case t{ta, tb, s.M, s.N, s.K, 1.5f, 0.5f, Activation::relu, 3};
        const Operands in(t);
        std::vector<std::vector<float>> results;
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          std::vector<float> c = in.c;
          cpu::gemm<float>(ta, tb, t.M, t.N, t.K, t.alpha, in.a.data(), t.lda(), in.b.data(), t.ldb(), t.beta,
                           c.data(), t.ldc(), t.act, bias_of(t, in));
          results.push_back(std::move(c));
        }
        set_num_threads(previous);
        check_against_reference(t, in, results[0], "cpu::gemm");
        // The K blocking does not depend on the split, so the sums are the same FMAs in the same order.
        REQUIRE(results[0] == results[1]);
        REQUIRE(results[0] == results[2]);
        std::vector<float> eigen = in.c;
        cpu::gemm_eigen<float>(ta, tb, t.M, t.N, t.K, t.alpha, in.a.data(), t.lda(), in.b.data(), t.ldb(), t.beta,
                               eigen.data(), t.ldc(), t.act, bias_of(t, in));
        double worst = 0;
        for (size_t i = 0; i < eigen.size(); ++i) worst = std::max(worst, double(std::fabs(eigen[i] - results[0][i])));
        INFO("M " << t.M << " N " << t.N << " K " << t.K << ": max |ember - Eigen| " << worst);
        REQUIRE(worst <= 1e-3);  // sums of up to 600 products of values in [0, 1), both in f32
      }
    }
  }
}

TEST_CASE("cpu::gemm with K = 0 scales C, adds the bias and activates it, in f32 and f64", "[gemm]") {
  std::vector<float> c{-1.0f, 2.0f, 3.0f, -4.0f};
  cpu::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f, c.data(), 2, Activation::relu);
  REQUIRE(c == std::vector<float>{0.0f, 4.0f, 6.0f, 0.0f});
  const double rows[] = {1, 2}, columns[] = {10, 20};
  std::vector<double> d{-1, 2, 3, -4};
  cpu::gemm<double>(false, false, 2, 2, 0, 1.0, nullptr, 1, nullptr, 2, 1.0, d.data(), 2, Activation::none,
                    {rows, columns});
  REQUIRE(d == std::vector<double>{10, 23, 15, 18});
}

TEST_CASE("cpu::gemm<double> (Eigen) adds row and column biases before the activation", "[gemm]") {
  const double a[] = {1, 2, 3, 4};  // (2, 2)
  const double b[] = {1, -1, 0, 1};
  const double rows[] = {1, -100}, columns[] = {0.5, -0.5};
  std::vector<double> c(4);
  cpu::gemm<double>(false, false, 2, 2, 2, 1.0, a, 2, b, 2, 0.0, c.data(), 2, Activation::relu, {rows, columns});
  // a b = {1, 1, 3, 1}
  REQUIRE(c == std::vector<double>{2.5, 1.5, 0, 0});
}
