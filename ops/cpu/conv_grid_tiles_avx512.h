// The register tiles of the padded-grid convolutions (ops/cpu/conv_grid_avx512.cpp: Note [Direct
// forward on a padded grid]; ops/cpu/conv_grid_input_grad_avx512.cpp), f32 on AVX-512: a GEMM of
// ROWS output channels (weights w (ROWS, K)) by taps read at fixed offsets of a zero-padded grid:
//   out[i * ld + j] = act(bias[i] + sum over k of w[i * K + k] * xpad[off[k] + j])
// for the grid positions j of `vectors` 16-wide vectors. Included by AVX-512 sources only.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/gemm_epilogue_avx512.h"
#include "ops/cpu/prefetch.h"

namespace ember::cpu::grid_detail {

// What one k step of a tile multiplies (Note [bf16 pairs on the grid]): an f32 weight by f32 grid
// values, one FMA a lane; or, where the CPU has AVX512-BF16, a pair of bf16 weights by pairs of
// bf16 grid values (two taps side by side in each 32-bit lane), one vdpbf16ps: two multiply-adds
// a lane.
struct F32Taps {
  using Weight = float;
  using Value = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 broadcast(float w) { return _mm512_set1_ps(w); }
  static __m512 multiply_add(__m512 acc, __m512 w, __m512 b) { return _mm512_fmadd_ps(w, b, acc); }
};
#if defined(__AVX512BF16__)
struct Bf16PairTaps {
  using Weight = uint32_t;  // two bf16 bit patterns: the lower tap in the low half
  using Value = uint32_t;
  static __m512i load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static __m512i broadcast(uint32_t w) { return _mm512_set1_epi32(int(w)); }
  static __m512 multiply_add(__m512 acc, __m512i w, __m512i b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)b);
  }
};
#endif

// One ROWS x 16 NV tile: acc[i][v] = sum over k of w[i * K + k] * b[off[k] + 16 v], stored through
// the epilogue to out[i * ld + 16 v].
template <class Taps, int ROWS, int NV>
void grid_tile(int64_t K, const typename Taps::Weight* w, const int64_t* off, const typename Taps::Value* b, float* out,
               int64_t ld, const gemm_detail::VectorEpilogue& epilogue) {
  using Vector = decltype(Taps::load(b));
  __m512 acc[ROWS][NV];
  gemm_detail::zero_tile(acc);
  for (int64_t k = 0; k < K; ++k) {
    Vector bv[NV];
    const typename Taps::Value* row = b + off[k];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = Taps::load(row + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; ++i) {
      const Vector wi = Taps::broadcast(w[i * K + k]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = Taps::multiply_add(acc[i][v], wi, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) epilogue.store(acc[i][v], out + i * ld, i, v, __mmask16(0xFFFF));
}

// Note [Thin groups on the grid]: a group of 1 or 2 output channels (depthwise layers, the small
// SE-ResNeXt's first stages) has no 8 rows for the tile above, and a weight feeds few FMAs
// whatever the layout: each input vector is used by M weights per tap. Its tiles are M rows of
// up to 8 vectors (a 1 x 8 step: 8 loads, 1 broadcast, 8 FMAs; 2 x 8: 8, 2 and 16), so that the
// accumulators still cover the FMA latency; a group of 4 at a stride (Note [Strided grid]) takes
// 4 x 6. The im2col + GEMM they replace ran 8-row tiles on 1 or 2 rows of weights.
template <int ROWS>
constexpr int kTileVectors = ROWS == 8 ? 3 : ROWS == 4 ? 6 : 8;

// The vectors of the next tile: at most kTileVectors<ROWS>; for 8 rows 3, or 2 + 2 for a last
// four (a 1-vector tile would issue as many loads as FMAs).
template <int ROWS>
int tile_vectors(int64_t left) {
  if constexpr (ROWS == 8) return left >= 5 || left == 3 ? 3 : left == 4 ? 2 : int(left);
  else return int(std::min<int64_t>(left, kTileVectors<ROWS>));
}

// The tiles of ROWS output channels over `vectors` vectors of the grid: w (ROWS, K), tap k of
// grid position j at xpad[off[k] + j], outputs at out[i * ld + j].
template <class Taps, int ROWS>
void grid_rows(int64_t vectors, int64_t K, const int64_t* off, const typename Taps::Weight* w,
               const typename Taps::Value* xpad, float* out, int64_t ld, const gemm_detail::VectorEpilogue& epilogue) {
  for (int64_t v0 = 0; v0 < vectors;) {
    const int nv = tile_vectors<ROWS>(vectors - v0);
    [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
      ((nv == Ns + 1 ? grid_tile<Taps, ROWS, Ns + 1>(K, w, off, xpad + 16 * v0, out + 16 * v0, ld, epilogue) : void()),
       ...);
    }(std::make_integer_sequence<int, kTileVectors<ROWS>>());
    v0 += nv;
  }
}

// grid_rows for a block of `rows` output channels: 8, or a thin group's 1, 2 or 4.
template <class Taps = F32Taps>
void grid_block(int64_t rows, int64_t vectors, int64_t K, const int64_t* off, const typename Taps::Weight* w,
                const typename Taps::Value* xpad, float* out, int64_t ld, const gemm_detail::VectorEpilogue& epilogue) {
  if (rows == 8) grid_rows<Taps, 8>(vectors, K, off, w, xpad, out, ld, epilogue);
  else if (rows == 4) grid_rows<Taps, 4>(vectors, K, off, w, xpad, out, ld, epilogue);
  else if (rows == 2) grid_rows<Taps, 2>(vectors, K, off, w, xpad, out, ld, epilogue);
  else grid_rows<Taps, 1>(vectors, K, off, w, xpad, out, ld, epilogue);
}

// Note [bf16 on the grid]: where the CPU's vdpbf16ps is no faster than its FMA (and for the strided
// input gradient everywhere), the grid is an f32 workspace whatever the tensors hold; elsewhere
// bf16 multiplies in pairs (Note [bf16 pairs on the grid], Note [bf16 weight gradient on position
// pairs] in conv_grid_avx512.cpp), whose sums differ from these in order only. A widened bf16 layer
// widens its input planes (exactly) while they are copied into the grid, which every layer does
// anyway, runs the f32 tiles, and rounds each output once while it is copied out of the grid
// buffer; its weights (and bias) are widened once per call. So a bf16 pass costs what the f32
// pass costs, where im2col + GEMM in bf16 paid for building, packing and folding columns of
// short rows (MNIST's layers, SE-ResNeXt's grouped 3 x 3s), and its result is the f32 pass's on
// the widened inputs, rounded once: bit for bit the same as running the f32 pass and converting.
// The grid takes bf16 where AVX512-BW and -VL load and store the 16-bit lanes under a mask.
#if defined(__AVX512BW__) && defined(__AVX512VL__)
inline constexpr bool kGridTakesBf16 = true;
#else
inline constexpr bool kGridTakesBf16 = false;
#endif

// Calls f(TypeTag<T>{}) for the element type of a grid pass's activations: f32 or bf16.
template <class F>
void dispatch_grid(DType dtype, F&& f) {
  if constexpr (kGridTakesBf16)
    if (dtype == DType::bf16) return f(TypeTag<BFloat16>{});
  EMBER_CHECK(dtype == DType::f32, "conv2d on the padded grid: expected f32 or bf16 tensors, got ", dtype_name(dtype));
  f(TypeTag<float>{});
}

// Copies `rows` rows of `width` values, src's rows src_stride apart, dst's dst_stride apart,
// widening or rounding between f32 and bf16 (Note [bf16 on the grid]): a plane into the grid
// (and a grid's rows back into a plane). In vectors, the last one masked: the rows are short (7
// to 64 values), and a memmove call per row took 10% of an MNIST epoch once its layers ran on
// the grid (perf, batch 128).
// Note [Same-type rows]: bf16 rows into a bf16 grid (dy for the weight gradient on position
// pairs, Note [bf16 weight gradient on position pairs]) went through f32 and back, the rounding in
// integer instructions (7% of a bf16 MNIST step in perf), and f32 rows (input planes into an f32
// grid, outputs out of it) through masked loads even for whole vectors, which Zen 5 runs slowly
// where the data is not in cache (Note [Pool lanes to memory] in pool_max_2x2_avx512.h).
// Note [Rows fetched ahead]: a row's last vector is read under a mask, and for rows under 16
// values (MNIST's 14) every read is; in perf the copies into the grid waited on those loads (70%
// of lay_out_planes' samples on the masked store after them), as if the hardware prefetchers
// did not follow masked reads. So each row fetches the row 4 further on (ops/cpu/prefetch.h).
// mnistprobe, f32 batch 64, alternated: faster in all 10 pairs, medians 3.53-3.86 ms against
// 3.61-3.92 (1-5%).

// Between tensors of one type the bits are copied as they are, 64 bytes a vector, whole vectors
// without masks (Note [Same-type rows]).
template <class Src, class Dst>
void copy_rows(const Src* src, int64_t src_stride, Dst* dst, int64_t dst_stride, int64_t rows, int64_t width) {
  if constexpr (std::is_same_v<Src, Dst>) {
    static_assert(sizeof(Src) == 4 || sizeof(Src) == 2);
    constexpr int64_t kLanes = 64 / sizeof(Src);
    const int64_t whole = width / kLanes * kLanes, left = width - whole;
    for (int64_t r = 0; r < rows; ++r) {
      const Src* from = src + r * src_stride;
      Dst* to = dst + r * dst_stride;
      prefetch_ahead(from, 4 * src_stride);  // Note [Rows fetched ahead]
      for (int64_t j = 0; j < whole; j += kLanes) _mm512_storeu_si512(to + j, _mm512_loadu_si512(from + j));
      if (left == 0) continue;
      if constexpr (sizeof(Src) == 4) {
        const __mmask16 tail = __mmask16((1u << left) - 1);
        _mm512_mask_storeu_epi32(to + whole, tail, _mm512_maskz_loadu_epi32(tail, from + whole));
      } else {
        const __mmask32 tail = __mmask32((uint64_t(1) << left) - 1);
        _mm512_mask_storeu_epi16(to + whole, tail, _mm512_maskz_loadu_epi16(tail, from + whole));
      }
    }
    return;
  }
  const int64_t whole = width / 16 * 16;
  const __mmask16 tail = gemm_detail::column_mask(int(width - whole), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const Src* from = src + r * src_stride;
    Dst* to = dst + r * dst_stride;
    prefetch_ahead(from, 4 * src_stride);  // Note [Rows fetched ahead]
    for (int64_t j = 0; j < whole; j += 16) store_rounded(to + j, load_widened(from + j, 0xFFFF), 0xFFFF);
    if (tail) store_rounded(to + whole, load_widened(from + whole, tail), tail);
  }
}

}  // namespace ember::cpu::grid_detail
#endif
