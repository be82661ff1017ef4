// The simulated mma.sync m16n8k16 (cuda/mma.h) against a scalar model of the PTX semantics. The
// fragments are packed here from the PTX ISA's own formulas ("Matrix Fragments for mma.m16n8k16
// with floating point type", transcribed independently of cuda/mma.h's inverse of them), so a
// wrong layout in the emulation fails. Every case runs under both execution modes.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "device_buffer.h"
#include "element_bits.h"
#include "mma_kernels.h"
#include "sim_execution.h"
#include "support/test_support.h"

namespace tk = ember::test_kernels;
using Catch::Matchers::Contains;
using ember::testing::DeviceBuffer;
using ember::testing::for_each_sim_execution;
using tk::MmaElement;

namespace {

// The logical operands as 16-bit patterns and C as floats: D (16x8) = A (16x16) @ B (16x8) + C.
struct Problem {
  uint16_t a[16][16] = {}, b[16][8] = {};
  float c[16][8] = {};
};

double decode(MmaElement e, uint16_t bits) { return ember::testing::decode_element(e == MmaElement::bf16, bits); }

uint16_t encode_exact(MmaElement e, double v) {  // for values the tests know to be exact
  static const auto table = [] {
    std::array<std::map<double, uint16_t>, 2> t;
    for (int which = 0; which < 2; ++which)
      for (uint32_t bits = 0xffffu;; --bits) {  // ends at 0x0000, so 0.0 maps to +0
        const double x = decode(which == 0 ? MmaElement::bf16 : MmaElement::f16, uint16_t(bits));
        if (!std::isnan(x)) t[size_t(which)][x] = uint16_t(bits);
        if (bits == 0) break;
      }
    return t;
  }();
  const auto& t = table[e == MmaElement::bf16 ? 0 : 1];
  const auto it = t.find(v);
  REQUIRE(it != t.end());
  return it->second;
}

struct Fragments {
  std::vector<uint32_t> a = std::vector<uint32_t>(32 * 4), b = std::vector<uint32_t>(32 * 2);
  std::vector<float> c = std::vector<float>(32 * 4);
};

// PTX ISA: groupID = laneid >> 2, threadID_in_group = laneid % 4; element ai / bi / ci of a lane
// is at the row and column below; register j holds elements 2j (bits 0-15) and 2j + 1.
Fragments pack(const Problem& p) {
  Fragments f;
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, tig = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (4 <= i && i < 6)) ? group : group + 8;
      const int col = i < 4 ? tig * 2 + (i & 1) : tig * 2 + (i & 1) + 8;
      f.a[size_t(lane * 4 + i / 2)] |= uint32_t(p.a[row][col]) << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const int row = i < 2 ? tig * 2 + (i & 1) : tig * 2 + (i & 1) + 8, col = group;
      f.b[size_t(lane * 2 + i / 2)] |= uint32_t(p.b[row][col]) << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) f.c[size_t(lane * 4 + i)] = p.c[i < 2 ? group : group + 8][tig * 2 + (i & 1)];
  }
  return f;
}

// Runs the kernel (one warp) and unpacks D with the accumulator layout.
std::vector<std::vector<float>> run_mma(MmaElement e, const Problem& p) {
  const Fragments f = pack(p);
  DeviceBuffer<uint32_t> a(f.a), b(f.b);
  DeviceBuffer<float> c(f.c), d(std::vector<float>(32 * 4, -1.0f));
  tk::mma_m16n8k16(e, a.get(), b.get(), c.get(), d.get());
  const std::vector<float> out = d.download();
  std::vector<std::vector<float>> result(16, std::vector<float>(8));
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) result[size_t(i < 2 ? lane / 4 : lane / 4 + 8)][size_t(lane % 4 * 2 + (i & 1))] =
        out[size_t(lane * 4 + i)];
  return result;
}

// The emulation's documented order (Note [mma numerics]): c, then the exact products in k order,
// summed in f32.
float model(MmaElement e, const Problem& p, int r, int n) {
  float sum = p.c[r][n];
  for (int k = 0; k < 16; ++k) sum += float(decode(e, p.a[r][k]) * decode(e, p.b[k][n]));
  return sum;
}

// What any correct mma must give: within (k + 1) * 2^-23 * (|c| + sum |a b|) of the exact value.
void check_against_exact(MmaElement e, const Problem& p, const std::vector<std::vector<float>>& d) {
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double exact = p.c[r][n], magnitude = std::fabs(p.c[r][n]);
      for (int k = 0; k < 16; ++k) {
        const double product = decode(e, p.a[r][k]) * decode(e, p.b[k][n]);
        exact += product;
        magnitude += std::fabs(product);
      }
      INFO("D[" << r << "][" << n << "]");
      if (std::isnan(exact)) { CHECK(std::isnan(d[size_t(r)][size_t(n)])); continue; }
      if (std::isinf(exact)) { CHECK(d[size_t(r)][size_t(n)] == exact); continue; }
      CHECK(std::fabs(d[size_t(r)][size_t(n)] - exact) <= 17.0 * std::ldexp(magnitude, -23));
    }
}

void check_model(MmaElement e, const Problem& p, const std::vector<std::vector<float>>& d) {
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      const float want = model(e, p, r, n), got = d[size_t(r)][size_t(n)];
      INFO("D[" << r << "][" << n << "] = " << got << ", expected " << want);
      if (std::isnan(want)) CHECK(std::isnan(got));
      else CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want));
    }
}

Problem random_problem(MmaElement e, uint32_t seed) {
  std::mt19937 gen(seed);
  Problem p;
  const int range = e == MmaElement::bf16 ? 12 : 6;
  for (auto& row : p.a) for (auto& x : row) x = ember::testing::random_element(e == MmaElement::bf16, gen, range);
  for (auto& row : p.b) for (auto& x : row) x = ember::testing::random_element(e == MmaElement::bf16, gen, range);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (auto& row : p.c) for (auto& x : row) x = normal(gen);
  return p;
}

constexpr MmaElement kElements[] = {MmaElement::bf16, MmaElement::f16};
const char* name(MmaElement e) { return e == MmaElement::bf16 ? "bf16" : "f16"; }

}  // namespace

TEST_CASE("simulated mma_m16n8k16 matches the PTX semantics on random fragments") {
  for_each_sim_execution([&] {
    for (MmaElement e : kElements)
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        INFO(name(e) << ", seed " << seed);
        const Problem p = random_problem(e, seed);
        const auto d = run_mma(e, p);
        check_model(e, p, d);
        check_against_exact(e, p, d);
      }
  });
}

TEST_CASE("simulated mma_m16n8k16 keeps f16 subnormals and propagates Inf and NaN") {
  const MmaElement e = MmaElement::f16;
  for_each_sim_execution([&] {
    Problem p = random_problem(e, 7);
    p.a[0][3] = 0x0001;  // smallest subnormal, 2^-24
    p.a[5][9] = 0x83ff;  // largest negative subnormal
    p.b[3][0] = 0x0200;  // a subnormal, 2^-15
    p.a[2][4] = 0x7c00;  // +Inf: row 2 becomes +-Inf (or NaN where B's row 4 holds a 0)
    p.b[4][6] = 0x0000;  // +0: Inf * 0 = NaN at D[2][6]
    p.b[11][5] = 0x7e00;  // NaN: column 5 becomes NaN
    const auto d = run_mma(e, p);
    check_model(e, p, d);
    check_against_exact(e, p, d);
    CHECK(std::isnan(d[2][6]));
    CHECK(std::isinf(d[2][0]));
    for (int r = 0; r < 16; ++r) CHECK(std::isnan(d[size_t(r)][5]));

    // A subnormal times a subnormal is exact in f32: 2^-24 * 2^-24 = 2^-48, not flushed.
    Problem tiny;
    tiny.a[6][13] = 0x0001;
    tiny.b[13][2] = 0x0001;
    tiny.a[9][0] = 0x8001;  // -2^-24 * 2^-15
    tiny.b[0][7] = 0x0200;
    const auto t = run_mma(e, tiny);
    CHECK(t[6][2] == std::ldexp(1.0f, -48));
    CHECK(t[9][7] == -std::ldexp(1.0f, -39));
    CHECK(t[0][0] == 0.0f);
  });
}

// Known, distinct values in every position: a swapped register, half or lane shows up as a
// wrong value at a known place. B (then A) is a one-hot selector, so each D element is one
// element of A (then B) plus its own C, all exact.
TEST_CASE("every (row, column) of A, B, C and D lands where the PTX layout puts it") {
  for_each_sim_execution([&] {
    for (MmaElement e : kElements) {
      INFO(name(e));
      const auto perm_n = [](int n) { return (5 * n + 3) % 16; };  // distinct k for each column
      Problem p;
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k) p.a[r][k] = encode_exact(e, r * 16 + k);  // 0..255: exact in both
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) p.b[k][n] = encode_exact(e, k == perm_n(n) ? 1.0 : 0.0);
      for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 8; ++n) p.c[r][n] = float(1000 * (r * 8 + n + 1));
      auto d = run_mma(e, p);
      for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 8; ++n) {
          INFO("D[" << r << "][" << n << "]");
          CHECK(d[size_t(r)][size_t(n)] == float(r * 16 + perm_n(n) + 1000 * (r * 8 + n + 1)));
        }

      const auto perm_r = [](int r) { return (3 * r + 1) % 16; };  // distinct k for each row
      Problem q;
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k) q.a[r][k] = encode_exact(e, k == perm_r(r) ? 1.0 : 0.0);
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) q.b[k][n] = encode_exact(e, -(k * 8 + n + 1));  // -1..-128
      d = run_mma(e, q);
      for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 8; ++n) {
          INFO("D[" << r << "][" << n << "]");
          CHECK(d[size_t(r)][size_t(n)] == float(-(perm_r(r) * 8 + n + 1)));
        }
    }
  });
}

TEST_CASE("an mma that only part of the warp executes is a clear error") {
  for_each_sim_execution([&] {
    const Problem p = random_problem(MmaElement::bf16, 1);
    const Fragments f = pack(p);
    std::vector<uint32_t> a48(f.a), b48(f.b);
    a48.resize(48 * 4), b48.resize(48 * 2);
    std::vector<float> c48(f.c);
    c48.resize(48 * 4);
    DeviceBuffer<uint32_t> a(a48), b(b48);
    DeviceBuffer<float> c(c48), d(48 * 4);
    // Half the warp returns before the mma.
    REQUIRE_THROWS_WITH(tk::mma_m16n8k16(MmaElement::bf16, a.get(), b.get(), c.get(), d.get(), 32, 16),
                        Contains("mma_kernel") && Contains("mma.sync.m16n8k16") && Contains("exited"));
    // The block's last warp has 16 lanes.
    REQUIRE_THROWS_WITH(tk::mma_m16n8k16(MmaElement::f16, a.get(), b.get(), c.get(), d.get(), 48),
                        Contains("mma.sync.m16n8k16 with mask 0xffffffff") &&
                            Contains("lanes 0xffff0000 of warp 1 do not exist (the block has 48 threads)"));
    // The two halves of the warp reach different mma instructions.
    REQUIRE_THROWS_WITH(tk::mma_m16n8k16(MmaElement::bf16, a.get(), b.get(), c.get(), d.get(), 32, 32, true),
                        Contains("divergent warp operations in warp 0") && Contains("mma.sync.m16n8k16"));
    // The whole warp: fine.
    tk::mma_m16n8k16(MmaElement::bf16, a.get(), b.get(), c.get(), d.get(), 32);
  });
}
