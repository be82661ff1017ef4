// ember's bf16 GEMM (cpu::gemm_bf16, ops/cpu/gemm_bf16.h) against a double-accumulated reference
// on the bf16-rounded operands, for every form and micro-kernel (pairs, widened, AMX tiles; the
// AVX512-BF16 and AMX ones where the build and machine have them, the portable ones and the AMX
// emulation everywhere) in one process: every transposition, bf16 and f32 operands in each
// position, alpha, beta, bias, activations, odd sizes around the 8 x 48 and 32 x 32 tiles and
// odd K, the cache blocking and tiny ones (odd KC included) that run every loop of the
// nest; then the rounding of f32 operands (ties, carries into the exponent, infinities, NaN),
// a hand-computed product, thread-count independence and K = 0.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/parallel.h"
#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_packed.h"
#include "gemm_reference.h"
#include "support/test_support.h"

using namespace ember;
using namespace ember::cpu::gemm_detail;

namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Values in [0, 1) with more mantissa bits than bf16 keeps, so that rounding matters.
std::vector<float> random_values(size_t n, uint32_t seed) { return test::gemm_test_values(n, seed, 100003); }

// One operand in both forms: f32 values and their bf16 rounding (what the GEMM multiplies).
struct Matrix {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  Matrix(size_t n, uint32_t seed) : f32(random_values(n, seed)), bf16(n) {
    for (size_t i = 0; i < n; ++i) bf16[i] = float_to_bfloat16_bits(f32[i]);
  }
  double rounded(int64_t i) const { return bfloat16_bits_to_float(bf16[size_t(i)]); }
  cpu::GemmOperand operand(bool as_bf16, int64_t ld, bool trans) const {
    return as_bf16 ? cpu::gemm_operand(bf16.data(), ld, trans) : cpu::gemm_operand(f32.data(), ld, trans);
  }
};

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
  Activation act;
  int bias = 0;         // 1: a bias per row of C, 2: per column, 3: both
  int types = 0;        // bit 0: A is f32 (else bf16), bit 1: B is f32
  int64_t lda() const { return (ta ? M : K) + 3; }  // wider than the matrix
  int64_t ldb() const { return (tb ? K : N) + 2; }
  int64_t ldc() const { return N + 5; }
  bool a_bf16() const { return !(types & 1); }
  bool b_bf16() const { return !(types & 2); }
};

struct Operands {
  Matrix a, b;
  std::vector<float> c, row_bias, column_bias;
  explicit Operands(const Case& t)
      : a(size_t((t.ta ? t.K : t.M) * t.lda()), 1),
        b(size_t((t.tb ? t.N : t.K) * t.ldb()), 2),
        c(random_values(size_t(t.M * t.ldc()), 3)),
        row_bias(random_values(size_t(t.M), 4)),
        column_bias(random_values(size_t(t.N), 5)) {}
  cpu::GemmBias<float> bias(const Case& t) const {
    return {t.bias & 1 ? row_bias.data() : nullptr, t.bias & 2 ? column_bias.data() : nullptr};
  }
};

// Checks `got` (C after the GEMM) against the double reference on the bf16-rounded operands, and
// that the columns of C past N are untouched.
// A product of two bf16 (8 significant bits each) is exact in f32, so the only errors are the f32
// sums' (gemm_reference.h); a bf16 rounding wrong by one unit would be off by ~2^-9 of a term.
void check_against_reference(const Case& t, const Operands& in, const std::vector<float>& got,
                             const std::string& what) {
  double worst = 0;
  const int64_t bad = test::GemmReference{t.M, t.N, t.K, t.ldc(), t.alpha, t.beta, t.act}.count_errors(
      [&](int64_t i, int64_t k) { return in.a.rounded(t.ta ? k * t.lda() + i : i * t.lda() + k); },
      [&](int64_t k, int64_t j) { return in.b.rounded(t.tb ? j * t.ldb() + k : k * t.ldb() + j); },
      [&](int64_t i) { return t.bias & 1 ? in.row_bias[size_t(i)] : 0.0f; },
      [&](int64_t j) { return t.bias & 2 ? in.column_bias[size_t(j)] : 0.0f; }, in.c, got, &worst);
  INFO(what << ": " << (t.ta ? "A^T" : "A") << (t.a_bf16() ? " bf16 " : " f32 ") << (t.tb ? "B^T" : "B")
            << (t.b_bf16() ? " bf16" : " f32") << " M " << t.M << " N " << t.N << " K " << t.K << " alpha "
            << t.alpha << " beta " << t.beta << " act " << int(t.act) << " bias " << t.bias << ", worst error "
            << worst);
  REQUIRE(bad == 0);
}

std::vector<float> run_packed(Bf16Kernel kernel, const Blocking& blocking, const Case& t, const Operands& in,
                              BRows b_rows = BRows::by_shape) {
  std::vector<float> c = in.c;
  const cpu::GemmBias<float> bias = in.bias(t);
  gemm_packed_bf16(kernel, blocking, t.M, t.N, t.K, t.alpha, in.a.operand(t.a_bf16(), t.lda(), t.ta),
                   in.b.operand(t.b_bf16(), t.ldb(), t.tb), t.beta, c.data(), t.ldc(), t.act, bias.rows,
                   bias.columns, b_rows);
  return c;
}

struct NamedKernel {
  const char* name;
  Bf16Kernel kernel;
  BRows b_rows = BRows::by_shape;  // the AVX512-BF16 dot kernel: B packed, or read in place where it is bf16
};

// Every form of the bf16 GEMM (Note [Widened bf16 GEMM], Note [AMX bf16 GEMM]) with every
// micro-kernel this build and machine have.
std::vector<NamedKernel> kernels() {
  std::vector<NamedKernel> k{{"portable", {portable_bf16_micro_kernel, nullptr}},
                             {"widened portable", {nullptr, portable_micro_kernel}},
                             {"amx emulated", {nullptr, nullptr, emulated_amx_bf16_micro_kernel}}};
  if (avx512_bf16_micro_kernel()) {
    k.push_back({"avx512_bf16", {avx512_bf16_micro_kernel(), nullptr}, BRows::packed});
    k.push_back({"avx512_bf16 B in place", {avx512_bf16_micro_kernel(), nullptr}, BRows::in_place});
  }
  if (avx512_micro_kernel()) k.push_back({"widened avx512", {nullptr, avx512_micro_kernel()}});
  if (amx_bf16_micro_kernel()) k.push_back({"amx", {nullptr, nullptr, amx_bf16_micro_kernel()}});
  else WARN("this CPU has no AMX-BF16 (or Linux refused its tiles): the AMX kernel is tested only emulated");
  return k;
}

struct NamedBlocking {
  const char* name;
  Blocking blocking;
};

std::vector<NamedBlocking> blockings(const Bf16Kernel& kernel) {
  // K > KC, M > MC, N > NC already at a few dozen; an odd KC is rounded up to whole pairs. AMX
  // rounds KC to whole 32-value tiles of K (MC and NC to 32), so it has its own tiny blockings:
  // K blocks of one tile and of two (K = 97: blocks of 64 and 33).
  if (kernel.amx) return {{"cache", amx_cache_blocking()}, {"tiny", {32, 32, 64}}, {"two tiles of K", {64, 32, 64}}};
  return {{"cache", bf16_cache_blocking()}, {"tiny", {16, 16, 96}}, {"tiny odd kc", {5, 8, 48}}};
}

}  // namespace

TEST_CASE("float_to_bfloat16_bits rounds to nearest even, carries into the exponent and keeps NaN a NaN",
          "[gemm][bf16]") {
  struct Expect {
    uint32_t f32;
    uint16_t bf16;
  };
  const Expect cases[] = {
      {0x3F800000, 0x3F80},  // 1
      {0x3F808000, 0x3F80},  // halfway, kept half even: down
      {0x3F818000, 0x3F82},  // halfway, kept half odd: up
      {0x3F808001, 0x3F81},  // just above halfway: up
      {0x3F807FFF, 0x3F80},  // just below halfway: down
      {0xBF818000, 0xBF82},  // negative values round their magnitude alike
      {0x3FFFFFFF, 0x4000},  // 1.99999988 -> 2: the carry steps the exponent
      {0x477FFFFF, 0x4780},  // 65535.996 -> 65536
      {0x7F7FFFFF, 0x7F80},  // the largest f32 -> +infinity
      {0xFF7FFFFF, 0xFF80},
      {0x7F800000, 0x7F80},  // infinities stay
      {0xFF800000, 0xFF80},
      {0x80000000, 0x8000},  // -0
      {0x00018000, 0x0002},  // subnormals round like any value
      {0x00008000, 0x0000},
      {0x7FC00000, 0x7FC0},  // quiet NaN
      {0x7F800001, 0x7FC0},  // signalling NaN: rounding would have made it infinity; quieted instead
      {0x7FFFFFFF, 0x7FFF},  // rounding would have carried out of the exponent
      {0xFF800001, 0xFFC0},  // the sign is kept
  };
  for (const Expect& e : cases) {
    INFO("f32 bits 0x" << std::hex << e.f32);
    REQUIRE(float_to_bfloat16_bits(float_of(e.f32)) == e.bf16);
  }
  REQUIRE(bits_of(bfloat16_bits_to_float(0x3F82)) == 0x3F820000u);
  REQUIRE(bfloat16_bits_to_float(0xC040) == -3.0f);
}

TEST_CASE("bf16 GEMM matches a double reference for every transposition, operand type, alpha, beta, activation "
          "and bias",
          "[gemm][bf16]") {
  // M: 1, < 8, 8, 9 (tile 8), 16, 33 (tile 32); N: 1, 15, 47, 48, 49, 97 (tiles 48, 32); K: 1, odd,
  // even, 32 and 33 (an AMX tile), > KC of the tiny blockings.
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{1, 1, 1},    {7, 47, 5},   {8, 48, 16},  {9, 49, 17},
                          {13, 31, 1},  {17, 97, 37}, {3, 145, 40}, {33, 15, 33}, {16, 65, 97}};
  const Activation acts[] = {Activation::none, Activation::relu, Activation::tanh};
  for (const NamedKernel& k : kernels())
    for (const NamedBlocking& b : blockings(k.kernel))
      for (const Shape& s : shapes)
        for (int types = 0; types < 4; ++types)
          for (bool ta : {false, true})
            for (bool tb : {false, true})
              for (float alpha : {1.0f, -0.5f})
                for (float beta : {0.0f, 1.0f, 0.7f})
                  for (Activation act : acts) {
                    const int bias = int(s.M + s.K + types + 2 * ta + tb) % 4;  // each kind, in turn
                    const Case t{ta, tb, s.M, s.N, s.K, alpha, beta, act, bias, types};
                    const Operands in(t);
                    check_against_reference(t, in, run_packed(k.kernel, b.blocking, t, in, k.b_rows),
                                            std::string(k.name) + ", " + b.name + " blocking");
                  }
}

TEST_CASE("bf16 GEMM with beta 0 never reads C", "[gemm][bf16]") {
  for (const NamedKernel& k : kernels()) {
    // B bf16 and not transposed where the kernel reads it in place, so that it does.
    const bool b_rows = k.b_rows == BRows::in_place;
    const Case t{false, !b_rows, 9, 50, 7, 1.0f, 0.0f, Activation::relu, 3, b_rows ? 0 : 1};
    const Operands in(t);
    Operands nan_c(t);
    std::fill(nan_c.c.begin(), nan_c.c.end(), NAN);
    const std::vector<float> got = run_packed(k.kernel, {16, 16, 96}, t, nan_c, k.b_rows);
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < t.N; ++j) REQUIRE(std::isfinite(got[size_t(i * t.ldc() + j)]));
    // The same values as with a finite C (which beta 0 ignores too).
    std::vector<float> finite = run_packed(k.kernel, {16, 16, 96}, t, in, k.b_rows);
    for (int64_t i = 0; i < t.M; ++i)
      for (int64_t j = 0; j < t.N; ++j) REQUIRE(got[size_t(i * t.ldc() + j)] == finite[size_t(i * t.ldc() + j)]);
  }
}

TEST_CASE("bf16 GEMM rounds f32 operands to nearest even while packing, infinities and NaN included",
          "[gemm][bf16]") {
  // Each special value is the only nonzero in its row of an f32 operand; the other operand is
  // bf16 ones, so every element of C is that value rounded to bf16 times 1 plus zeros: exact.
  struct Special {
    uint32_t f32;
    uint32_t want;  // f32 bits of the bf16 result
  };
  const Special specials[] = {
      {0x3F808000, 0x3F800000}, {0x3F818000, 0x3F820000}, {0x3F808001, 0x3F810000}, {0x3FFFFFFF, 0x40000000},
      {0xC77FFFFF, 0xC7800000}, {0x7F7FFFFF, 0x7F800000}, {0x7F800000, 0x7F800000}, {0xFF800000, 0xFF800000},
      {0x7F800001, 0x7FC00000}, {0x7FFFFFFF, 0x7FFF0000}, {0x3E2AAAAB, 0x3E2B0000},  // 1/6 rounds up
  };
  const int64_t R = std::size(specials), K = 37, N = 3;  // K odd and past a vector of 16 pairs
  std::vector<uint16_t> ones(size_t(K * N), 0x3F80);
  for (const NamedKernel& k : kernels()) {
    for (bool special_is_a : {true, false}) {
      for (bool trans : {false, true}) {
        // The special operand as op(X) (R, K) with X[r][col] = special r at col = 7 r mod K: A (M = R)
        // stored (R, K) or (K, R); or B^T, B (K, N = R) stored (K, R) or (R, K).
        const bool rows_contiguous = special_is_a ? !trans : trans;
        std::vector<float> x(size_t(R * K), 0.0f);
        for (int64_t r = 0; r < R; ++r) {
          const int64_t col = 7 * r % K;
          x[size_t(rows_contiguous ? r * K + col : col * R + r)] = float_of(specials[r].f32);
        }
        const int64_t ld = rows_contiguous ? K : R;
        const int64_t M = special_is_a ? R : N, cols = special_is_a ? N : R;
        std::vector<float> c(size_t(M * cols), -7.0f);
        const cpu::GemmOperand ops_x = cpu::gemm_operand(x.data(), ld, trans);
        if (special_is_a)  // ones as B (K, N) stored (N, K): every element 1
          gemm_packed_bf16(k.kernel, bf16_kernel_blocking(k.kernel), M, cols, K, 1.0f, ops_x,
                           cpu::gemm_operand(ones.data(), K, true), 0.0f, c.data(), cols, Activation::none);
        else
          gemm_packed_bf16(k.kernel, bf16_kernel_blocking(k.kernel), M, cols, K, 1.0f,
                           cpu::gemm_operand(ones.data(), K), ops_x, 0.0f, c.data(), cols, Activation::none);
        for (int64_t r = 0; r < R; ++r) {
          for (int64_t o = 0; o < N; ++o) {
            const float got = special_is_a ? c[size_t(r * cols + o)] : c[size_t(o * cols + r)];
            const float want = float_of(specials[r].want);
            INFO(k.name << (special_is_a ? ": A" : ": B") << (trans ? "^T" : "") << " f32 bits 0x" << std::hex
                        << specials[r].f32 << ", got bits 0x" << bits_of(got));
            if (std::isnan(want)) REQUIRE(std::isnan(got));
            else REQUIRE(bits_of(got) == bits_of(want));
          }
        }
      }
    }
  }
}

TEST_CASE("cpu::gemm_bf16 computes a hand-checked product with bias and relu", "[gemm][bf16]") {
  // A (2, 3) bf16: [[1, 2, 3], [-1, 0.5, 4]]; B (3, 2) f32: [[1, -1], [0.25, 2], [1.00390625, 0]].
  // 1.00390625 = 1 + 2^-8 is a tie that rounds to 1.
  const uint16_t a[] = {0x3F80, 0x4000, 0x4040, 0xBF80, 0x3F00, 0x4080};
  const float b[] = {1.0f, -1.0f, 0.25f, 2.0f, 1.00390625f, 0.0f};
  const float rows[] = {0.5f, -1.0f}, columns[] = {0.0f, 10.0f};
  std::vector<float> c(4, NAN);
  cpu::gemm_bf16(2, 2, 3, 2.0f, cpu::gemm_operand(a, 3), cpu::gemm_operand(b, 2), 0.0f, c.data(), 2,
                 Activation::relu, {rows, columns});
  // op(A) op(B) = [[1 + 0.5 + 3, -1 + 4], [-1 + 0.125 + 4, 1 + 1]] = [[4.5, 3], [3.125, 2]]
  REQUIRE(c == std::vector<float>{9.5f, 16.5f, 5.25f, 13.0f});
  // Transposed storage of both, beta 1, no activation: A^T stored (3, 2), B^T stored (2, 3).
  const uint16_t at[] = {0x3F80, 0xBF80, 0x4000, 0x3F00, 0x4040, 0x4080};
  const float bt[] = {1.0f, 0.25f, 1.00390625f, -1.0f, 2.0f, 0.0f};
  std::vector<float> d{1.0f, 2.0f, 3.0f, 4.0f};
  cpu::gemm_bf16(2, 2, 3, -1.0f, cpu::gemm_operand(at, 2, true), cpu::gemm_operand(bt, 3, true), 1.0f, d.data(), 2);
  REQUIRE(d == std::vector<float>{-3.5f, -1.0f, -0.125f, 2.0f});
}

TEST_CASE("cpu::gemm_bf16 on large shapes matches the reference for any thread count, and K = 0 only scales",
          "[gemm][bf16][threads]") {
  const int previous = num_threads();
  struct Shape {
    int64_t M, N, K;
  };
  // Past the cache blocking in K (odd K in the last block) and skinny sides, all above the 2.5M
  // pair steps (M N K / 2) under which the pair form keeps to one thread (Note [bf16 work items]),
  // and so above the widened form's 1M steps; the AMX form (its own rule, AmxPacking::single_thread)
  // splits the first two and keeps the others on one. cpu::gemm_bf16 runs this CPU's form; the pair
  // form (the portable kernel where the CPU has no AVX512-BF16) and the AMX form (emulated where
  // the CPU has none) also run explicitly where it is not this CPU's, so that their threaded loop
  // nests are checked on every machine. B packed per micro-panel (Note [B packed per micro-panel])
  // in the pair form on two threads: 120 rows in two row blocks, 300 in four (the target); four
  // pair MCs and more make more row blocks: B packed ahead, by both threads (N K >= 64K values).
  const int64_t ahead = 4 * pair_blocking(bf16_cache_blocking()).mc + 100;
  const Shape shapes[] = {{300, 260, 1100}, {20, 4200, 130}, {64, 196, 1153}, {120, 300, 700}, {ahead, 700, 100}};
  const Bf16MicroKernel amx = amx_bf16_micro_kernel() ? amx_bf16_micro_kernel() : emulated_amx_bf16_micro_kernel;
  const Bf16MicroKernel dot = avx512_bf16_micro_kernel() ? avx512_bf16_micro_kernel() : portable_bf16_micro_kernel;
  enum class Form { default_form, pair, amx };
  std::vector<Form> forms{Form::default_form, Form::amx};
  if (default_bf16_kernel().dot == nullptr) forms.push_back(Form::pair);
  const char* const form_names[] = {"cpu::gemm_bf16", "pair form", "AMX form"};
  for (const Shape& s : shapes) {
    for (int types : {0, 2}) {
      for (Form form : forms) {
        const Case t{false, s.M == 20, s.M, s.N, s.K, 1.5f, 0.5f, Activation::relu, 3, types};
        const Operands in(t);
        std::vector<std::vector<float>> results;
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          std::vector<float> c = in.c;
          const cpu::GemmOperand a = in.a.operand(t.a_bf16(), t.lda(), t.ta), b = in.b.operand(t.b_bf16(), t.ldb(), t.tb);
          const cpu::GemmBias<float> bias = in.bias(t);
          if (form == Form::amx)
            gemm_packed_bf16({nullptr, nullptr, amx}, amx_cache_blocking(), t.M, t.N, t.K, t.alpha, a, b, t.beta,
                             c.data(), t.ldc(), t.act, bias.rows, bias.columns);
          else if (form == Form::pair)
            gemm_packed_bf16({dot, nullptr}, bf16_cache_blocking(), t.M, t.N, t.K, t.alpha, a, b, t.beta, c.data(),
                             t.ldc(), t.act, bias.rows, bias.columns);
          else
            cpu::gemm_bf16(t.M, t.N, t.K, t.alpha, a, b, t.beta, c.data(), t.ldc(), t.act, bias);
          results.push_back(std::move(c));
        }
        set_num_threads(previous);
        check_against_reference(t, in, results[0], form_names[int(form)]);
        REQUIRE(results[0] == results[1]);  // the K blocking does not depend on the split
      }
    }
  }
  std::vector<float> c{-1.0f, 2.0f, 3.0f, -4.0f};
  cpu::gemm_bf16(2, 2, 0, 1.0f, cpu::gemm_operand(static_cast<const uint16_t*>(nullptr), 1),
                 cpu::gemm_operand(static_cast<const float*>(nullptr), 2), 2.0f, c.data(), 2, Activation::relu);
  REQUIRE(c == std::vector<float>{0.0f, 4.0f, 6.0f, 0.0f});
}

// The kernel that reads B in place pairs B's rows in registers and issues the packed kernel's
// vdpbf16ps in its order (Note [bf16 pairs from B's rows]), so C is the same bits; here on one and
// two threads, past the cache blocking in K (odd K in the last block), at every width of the last
// tile (1 to 47 columns past the 48s, so every mask of both loads) and at row strides whose rows
// are not 64-byte aligned.
TEST_CASE("the bf16 GEMM reading B in place gives the bits of the packed one", "[gemm][bf16][threads]") {
  if (!avx512_bf16_rows_micro_kernel()) EMBER_SKIP("this build has no AVX512-BF16 kernel");
  const Bf16Kernel dot{avx512_bf16_micro_kernel(), nullptr};
  const int previous = num_threads();
  struct Shape {
    int64_t M, N, K;
  };
  std::vector<Shape> shapes = {{8, 48, 2}, {1, 1, 1}, {40, 96, 2051}, {130, 3136 / 4, 288}, {64, 196, 577}};
  for (int64_t tail = 1; tail < 48; ++tail) shapes.push_back({9, 48 + tail, 7 + tail % 4});
  for (const Shape& s : shapes)
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const Case t{false, false, s.M, s.N, s.K, 1.5f, 0.5f, Activation::relu, 3, 0};
      const Operands in(t);
      INFO("M " << s.M << " N " << s.N << " K " << s.K << ", " << threads << " threads");
      const Blocking& blocking = bf16_kernel_blocking(dot);
      CHECK(run_packed(dot, blocking, t, in, BRows::in_place) == run_packed(dot, blocking, t, in, BRows::packed));
    }
  set_num_threads(previous);
}

// The in-place kernel reads only B's own columns and rows (masked loads at the tile's last
// columns, an odd K's last row alone): with B's last row ending where a page without access
// begins, any read past it faults. Every width of the last tile, odd and even K.
TEST_CASE("the bf16 GEMM reading B in place never reads past B's last element", "[gemm][bf16]") {
  if (!avx512_bf16_rows_micro_kernel()) EMBER_SKIP("this build has no AVX512-BF16 kernel");
  const Bf16Kernel dot{avx512_bf16_micro_kernel(), nullptr};
  const int64_t page = sysconf(_SC_PAGESIZE);
  for (const int64_t N : {1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 95})
    for (const int64_t K : {1, 2, 5, 6}) {
      INFO("N " << N << " K " << K);
      const int64_t M = 9, bytes = K * N * int64_t(sizeof(uint16_t));
      const int64_t mapped = (bytes + page - 1) / page * page + page;
      void* region = mmap(nullptr, size_t(mapped), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      REQUIRE(region != MAP_FAILED);
      char* guard = static_cast<char*>(region) + mapped - page;
      REQUIRE(mprotect(guard, size_t(page), PROT_NONE) == 0);
      uint16_t* b = reinterpret_cast<uint16_t*>(guard - bytes);  // B (K, N), rows N apart, ends at the guard
      const Matrix values(size_t(K * N), 9);
      std::copy(values.bf16.begin(), values.bf16.end(), b);
      const Matrix a(size_t(M * K), 10);
      std::vector<float> in_place(size_t(M * N)), packed(size_t(M * N));
      for (auto [rows, c] : {std::pair{BRows::in_place, &in_place}, std::pair{BRows::packed, &packed}})
        gemm_packed_bf16(dot, bf16_kernel_blocking(dot), M, N, K, 1.0f, cpu::gemm_operand(a.bf16.data(), K),
                         cpu::gemm_operand(b, N), 0.0f, c->data(), N, Activation::none, nullptr, nullptr, rows);
      CHECK(in_place == packed);
      munmap(region, size_t(mapped));
    }
}

TEST_CASE("the AMX form reloads its tile configuration after the tiles were released between calls",
          "[gemm][bf16][amx]") {
  // Note [AMX tile configuration]: the configuration stays loaded between GEMMs; other code on the
  // thread may release the tiles (or load its own), and the next call must notice.
  if (!amx_bf16_micro_kernel()) EMBER_SKIP("this CPU has no AMX-BF16 (or Linux refused its tiles)");
  const Case t{false, false, 40, 50, 70, 1.0f, 0.0f, Activation::none, 0, 0};
  const Operands in(t);
  const Bf16Kernel amx{nullptr, nullptr, amx_bf16_micro_kernel()};
  const std::vector<float> first = run_packed(amx, amx_cache_blocking(), t, in);
  release_amx_tiles();
  const std::vector<float> after_release = run_packed(amx, amx_cache_blocking(), t, in);
  check_against_reference(t, in, after_release, "amx after release");
  REQUIRE(after_release == first);
}

TEST_CASE("cpu::gemm_bf16 rejects an operand with both or neither of bf16 and f32 data", "[gemm][bf16]") {
  const uint16_t a16[] = {0x3F80};
  const float a32[] = {1.0f};
  float c[] = {5.0f};
  const cpu::GemmOperand both{a16, a32, 1, false}, neither{nullptr, nullptr, 1, false};
  REQUIRE_THROWS_AS(cpu::gemm_bf16(1, 1, 1, 1.0f, both, cpu::gemm_operand(a32, 1), 0.0f, c, 1), Error);
  REQUIRE_THROWS_AS(cpu::gemm_bf16(1, 1, 1, 1.0f, cpu::gemm_operand(a16, 1), neither, 0.0f, c, 1), Error);
  REQUIRE(c[0] == 5.0f);
  cpu::gemm_bf16(1, 1, 1, 3.0f, cpu::gemm_operand(a16, 1), cpu::gemm_operand(a32, 1), 0.0f, c, 1);
  REQUIRE(c[0] == 3.0f);
}
