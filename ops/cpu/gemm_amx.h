// The AMX form of the bf16 GEMM behind cpu::gemm_bf16 (Note [AMX bf16 GEMM] in gemm_amx_packing.cpp):
//   C (M, N) f32 = act(alpha * op(A) op(B) + beta * C + bias), operands bf16 or f32 as in
//   ops/cpu/gemm_bf16.h,
// run by the packed GEMM's loop nest (ops/cpu/gemm_loop_nest.h) on panels laid out for AMX tile
// loads, with a micro-kernel that computes a 32 x 32 block of C as 2 x 2 accumulator tiles.
//
// Panels, in 32-bit Bf16Pairs (two values of K, Note [bf16 packed panels]); K is padded with
// zeros to whole tiles of 16 pairs (32 values), and each 16-pair block of K holds, for a
// 32-row micro-panel, two 16 x 16 tiles of 1 KiB one after the other:
//   A (rows of C):    block[(g * 16 + i) * 16 + s]  row 16 g + i, pair s    (a tile row: one row's K)
//   B^T (columns):    block[(h * 16 + s) * 16 + j]  pair s, column 16 h + j (a tile row: one pair
//                                                    of K for 16 columns, AMX's "VNNI" layout)
// so that every tile load reads 1 KiB of consecutive bytes (stride 64).
#pragma once

#include <cstdint>

#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_microkernel.h"
#include "ops/cpu/gemm_packed.h"

namespace ember::cpu::gemm_detail {

constexpr int kAmxTileSide = 16;                   // rows of a tile, and f32 columns of an accumulator
constexpr int kAmxTilePairs = 16;                  // pairs of K in a row of an operand tile (64 bytes)
constexpr int kAmxMR = 2 * kAmxTileSide;           // rows of C per micro-kernel call
constexpr int kAmxNR = 2 * kAmxTileSide;           // columns of C per micro-kernel call
constexpr int kAmxTileWords = kAmxTileSide * kAmxTilePairs;  // Bf16Pairs in an operand tile (1 KiB)

// Pairs per packed row for kc values of K: whole tiles of K (32 values).
inline int64_t amx_steps(int64_t kc) { return (kc + 2 * kAmxTilePairs - 1) / (2 * kAmxTilePairs) * kAmxTilePairs; }

// Whether this CPU has AMX-BF16 and Linux lets this process use the tile registers (asked once,
// with arch_prctl(ARCH_REQ_XCOMP_PERM)). EMBER_AMX=0 answers no, to measure without it.
bool amx_bf16_available();

// The micro-kernel with AMX instructions, or nullptr where amx_bf16_available() is false or the
// build has no AVX-512 (its epilogue is the AVX-512 one). It needs the tile configuration that an
// ensure_amx_tiles() loads on the calling thread.
Bf16MicroKernel amx_bf16_micro_kernel();

// The same arithmetic on the same panels in plain C++, any machine: it keeps the packing, the
// tile addressing and the loop nest tested where the CPU has no AMX. Products are exact and
// sums f32, in the order the instruction's definition gives (pair by pair along K); unlike AMX it
// keeps subnormal inputs and results instead of flushing them to zero.
void emulated_amx_bf16_micro_kernel(int64_t steps, const Bf16Pair* a, const Bf16Pair* b, float* c, int64_t ldc,
                                    int m, int n, const TileUpdate& update);

// Makes sure this thread's tiles hold the AMX kernel's configuration, and leaves it loaded.
// Note [AMX tile configuration]: loading a configuration (LDTILECFG) took ~55 ns here, reading the
// current one and comparing (STTILECFG) ~6 ns, so each chunk of work items reads, and loads only
// when another configuration is there: after a first call, or after other code on this thread
// (another library's AMX kernels) configured or released the tiles. The tiles stay configured
// between GEMMs (releasing and reloading per call cost a tenth of a 32^3 bf16 GEMM). Does nothing
// where amx_bf16_available() is false.
void ensure_amx_tiles();

// Gives this thread's tile state back (TILERELEASE), as other AMX code may; the next GEMM loads
// its configuration again. Does nothing where amx_bf16_available() is false.
void release_amx_tiles();

// Issues `rounds` x 4 independent TDPBF16PS on register-resident tiles (the instruction's peak,
// for `ember bench ops`) and returns the flops done: 0 where amx_bf16_available() is false.
double amx_bf16_peak_loop(int64_t rounds);

// The AMX form's blocking (Note [AMX bf16 GEMM blocking] in gemm_amx_packing.cpp).
const Blocking& amx_cache_blocking();

// The AMX form alone: `kernel` is amx_bf16_micro_kernel() or the emulation. K must be positive.
void gemm_packed_bf16_amx(Bf16MicroKernel kernel, const Blocking& blocking, int64_t M, int64_t N, int64_t K,
                          float alpha, const GemmOperand& A, const GemmOperand& B, float beta, float* C, int64_t ldc,
                          Activation act, const float* row_bias, const float* column_bias);

}  // namespace ember::cpu::gemm_detail
