// The AMX micro-kernel of the bf16 GEMM and its plain C++ emulation (ops/cpu/gemm_amx.h; Note
// [AMX bf16 GEMM] in gemm_amx_packing.cpp): a 32 x 32 block of C from a 32-row panel of A and a
// 32-column panel of B^T, `steps` pairs of K (a multiple of 16), as 2 x 2 accumulator tiles:
//   tile (g, h) += A tile g (16 rows x 16 pairs) . B tile h (16 pairs x 16 columns)
// per 16 pairs, then C = act(alpha * acc + beta * C + bias) for rows < m, columns < n.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/gemm_bf16_pairs.h"

#if defined(__AVX512F__)
#include "ops/cpu/gemm_epilogue_avx512.h"
#endif

namespace ember::cpu::gemm_detail {

void emulated_amx_bf16_micro_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc,
                                    int m, int n, const TileUpdate& update) {
  float acc[kAmxMR][kAmxNR] = {};
  for (int64_t s0 = 0; s0 < steps; s0 += kAmxTilePairs) {
    const Bf16Pair* a_block = a + s0 * kAmxMR;
    const Bf16Pair* b_block = b + s0 * kAmxNR;
    for (int g = 0; g < 2; ++g)
      for (int h = 0; h < 2; ++h) {
        const Bf16Pair* a_tile = a_block + g * kAmxTileWords;
        const Bf16Pair* b_tile = b_block + h * kAmxTileWords;
        for (int i = 0; i < kAmxTileSide; ++i)
          for (int s = 0; s < kAmxTilePairs; ++s) {
            const Bf16Pair x = a_tile[i * kAmxTilePairs + s];
            float* row = &acc[g * kAmxTileSide + i][h * kAmxTileSide];
            for (int j = 0; j < kAmxTileSide; ++j) {
              const Bf16Pair y = b_tile[s * kAmxTileSide + j];
              row[j] += even_half(x) * even_half(y);
              row[j] += odd_half(x) * odd_half(y);
            }
          }
      }
  }
  store_tile(&acc[0][0], kAmxNR, c, ldc, m, n, update);
}

namespace {

// Linux keeps the 8 KiB of tile data out of a process's saved state until it asks for it.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The configuration every AMX kernel call uses: palette 1, tiles 0-7 all 16 rows of 64 bytes
// (accumulators 0-3: 16 x 16 f32; A tiles 4-5 and B tiles 6-7: 16 x 16 pairs).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  TileConfig() {
    for (int t = 0; t < 8; ++t) {
      bytes_per_row[t] = 64;
      rows[t] = kAmxTileSide;
    }
  }
};
static_assert(sizeof(TileConfig) == 64);

#if defined(__AVX512F__) && defined(__x86_64__)
bool cpu_has_amx_bf16() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22);
  return tile && bf16;
}

#define EMBER_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))

// Note [AMX tile configuration] in gemm_amx.h.
EMBER_AMX_TARGET void load_tile_config_if_needed() {
  static const TileConfig config;
  alignas(64) unsigned char current[sizeof(TileConfig)];
  _tile_storeconfig(current);
  // STTILECFG writes all 64 bytes; GCC's intrinsic declares only 8 as its output.
  asm volatile("" : : "r"(current) : "memory");
  if (std::memcmp(current, &config, sizeof config) != 0) _tile_loadconfig(&config);
}

EMBER_AMX_TARGET void release_tiles() { _tile_release(); }

// Note [AMX kernel]: tile register numbers are part of each instruction, so the 2 x 2 block is
// written out. The panels were written by the packing before this call through a function
// pointer (opaque to the compiler), and _tile_stored clobbers memory, so the inline-assembly tile
// loads and stores are ordered with the surrounding C++ memory accesses.
EMBER_AMX_TARGET void amx_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc, int m,
                                 int n, const TileUpdate& update) {
  constexpr long stride = kAmxTilePairs * sizeof(Bf16Pair);  // 64 bytes: each tile is 1 KiB in a row
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s0 = 0; s0 < steps; s0 += kAmxTilePairs) {
    const Bf16Pair* a_block = a + s0 * kAmxMR;
    const Bf16Pair* b_block = b + s0 * kAmxNR;
    _tile_loadd(4, a_block, stride);
    _tile_loadd(6, b_block, stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, b_block + kAmxTileWords, stride);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a_block + kAmxTileWords, stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float acc[kAmxMR][kAmxNR];
  constexpr long acc_stride = kAmxNR * sizeof(float);
  _tile_stored(0, &acc[0][0], acc_stride);
  _tile_stored(1, &acc[0][kAmxTileSide], acc_stride);
  _tile_stored(2, &acc[kAmxTileSide][0], acc_stride);
  _tile_stored(3, &acc[kAmxTileSide][kAmxTileSide], acc_stride);

  const VectorEpilogue epilogue(update);
  for (int i = 0; i < m; ++i)
    for (int v = 0; v < 2; ++v)
      epilogue.store(_mm512_load_ps(&acc[i][16 * v]), c + i * ldc, i, v, column_mask(n, v));
  epilogue.finish(c, ldc, m, n);
}

EMBER_AMX_TARGET void dot_product_rounds(int64_t rounds) {
  alignas(64) static const Bf16Pair zeros[kAmxTileWords] = {};
  _tile_loadd(4, zeros, 64);
  _tile_loadd(5, zeros, 64);
  _tile_loadd(6, zeros, 64);
  _tile_loadd(7, zeros, 64);
  for (int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}
#undef EMBER_AMX_TARGET
#endif

}  // namespace

bool amx_bf16_available() {
  static const bool available = [] {
    const char* env = std::getenv("EMBER_AMX");
    if (env && std::string_view(env) == "0") return false;
#if defined(__AVX512F__) && defined(__x86_64__)
    return cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return available;
}

Bf16MicroKernel amx_bf16_micro_kernel() {
#if defined(__AVX512F__) && defined(__x86_64__)
  return amx_bf16_available() ? amx_kernel : nullptr;
#else
  return nullptr;
#endif
}

double amx_bf16_peak_loop(int64_t rounds) {
  if (!amx_bf16_available()) return 0;
#if defined(__AVX512F__) && defined(__x86_64__)
  ensure_amx_tiles();
  dot_product_rounds(rounds);
#endif
  return 4.0 * 2.0 * kAmxTileSide * kAmxTileSide * 2 * kAmxTilePairs * double(rounds);
}

void ensure_amx_tiles() {
#if defined(__AVX512F__) && defined(__x86_64__)
  if (amx_bf16_available()) load_tile_config_if_needed();
#endif
}

void release_amx_tiles() {
#if defined(__AVX512F__) && defined(__x86_64__)
  if (amx_bf16_available()) release_tiles();
#endif
}

}  // namespace ember::cpu::gemm_detail
