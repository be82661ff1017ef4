// The register tiles of the padded-grid convolutions (ops/cpu/conv_grid_avx512.cpp: Note [Direct
// forward on a padded grid]; ops/cpu/conv_grid_input_grad_avx512.cpp), f32 on AVX-512: a GEMM of
// ROWS output channels (weights w (ROWS, K)) by taps read at fixed offsets of a zero-padded grid:
//   out(i, j) = act(bias[i] + sum over k of w[i * K + k] * xpad[off[k] + j])
// for the grid positions j of `vectors` 16-wide vectors, out(i, j) placed by an Output (below: a
// buffer of grid rows, or the output planes). Included by AVX-512 sources only.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

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

// Where a tile's vectors go: vector v of the grid (positions [16 v, 16 v + 16)) of tile row i.
// GridRowsOutput keeps the grid's rows, for a caller that rearranges them (the strided input
// gradient's phases); PlanesOutput puts the outputs straight into the output planes (Note [Tile
// outputs into the planes]).
struct GridRowsOutput {
  float* out;  // row i at out + i * ld
  int64_t ld;
  using Place = int64_t;
  Place place(int64_t v) const { return 16 * v; }
  void store(Place at, int i, __m512 x) const { _mm512_storeu_ps(out + i * ld + at, x); }
};

// Note [Tile outputs into the planes]: grid position j = oh wp + ow is output (oh, ow) when ow <
// Wo and oh < Ho, and the valid positions of one 16-wide vector are consecutive outputs of the
// plane (a row's last column, then the next row's first), so a vector goes to the plane as one
// masked store of its valid lanes, closed up by a compress (in registers) where padding columns
// fall between them. The tiles used to store whole vectors to a buffer of grid rows, whose Wo-wide
// rows were then copied to y; in perf that copy was 10% of an f32 MNIST step (batch 64), its
// stores waiting on y's lines, where stores inside the tile overlap the FMAs.
struct VectorPlace {
  int64_t first;       // the plane offset of the vector's first valid position
  __mmask16 lanes;     // its valid positions
  __mmask16 stored;    // the lanes that they take once closed up: a prefix
};
inline std::vector<VectorPlace> vector_places(int64_t vectors, int64_t wp, int64_t out_h, int64_t out_w) {
  std::vector<VectorPlace> places(static_cast<size_t>(vectors));
  for (int64_t v = 0; v < vectors; ++v) {
    const int64_t j0 = 16 * v;
    VectorPlace& p = places[size_t(v)];
    p.first = std::min(j0 / wp, out_h) * out_w + (j0 / wp < out_h ? std::min(j0 % wp, out_w) : 0);
    p.lanes = 0;
    for (int l = 0; l < 16; ++l) {
      const int64_t j = j0 + l;
      if (j / wp < out_h && j % wp < out_w) p.lanes = __mmask16(p.lanes | 1u << l);
    }
    p.stored = __mmask16((1u << __builtin_popcount(p.lanes)) - 1);
  }
  return places;
}

template <class T>
struct PlanesOutput {
  T* y;  // tile row i's plane at y + i * plane
  int64_t plane;
  const VectorPlace* places;  // vector_places of the grid
  using Place = VectorPlace;
  Place place(int64_t v) const { return places[v]; }
  void store(const Place& at, int i, __m512 x) const {
    T* to = y + i * plane + at.first;
    if constexpr (std::is_same_v<T, float>)
      if (at.lanes == 0xFFFF) return _mm512_storeu_ps(to, x);
    if (at.lanes != at.stored) x = _mm512_maskz_compress_ps(at.lanes, x);
    store_rounded(to, x, at.stored);
  }
};

// One ROWS x 16 NV tile at grid vector v0: acc[i][v] = sum over k of w[i * K + k] *
// b[off[k] + 16 v] (b at the grid's vector v0), stored through the epilogue (beta 0, no column
// bias) to output's vector v0 + v of row i.
template <class Taps, int ROWS, int NV, class Output>
void grid_tile(int64_t K, const typename Taps::Weight* w, const int64_t* off, const typename Taps::Value* b,
               const Output& output, int64_t v0, const gemm_detail::VectorEpilogue& epilogue) {
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
  for (int v = 0; v < NV; ++v) {
    const typename Output::Place at = output.place(v0 + v);
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; ++i) output.store(at, i, epilogue.row_value(acc[i][v], i));
  }
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
// grid position j at xpad[off[k] + j], outputs through `output`.
template <class Taps, int ROWS, class Output>
void grid_rows(int64_t vectors, int64_t K, const int64_t* off, const typename Taps::Weight* w,
               const typename Taps::Value* xpad, const Output& output, const gemm_detail::VectorEpilogue& epilogue) {
  for (int64_t v0 = 0; v0 < vectors;) {
    const int nv = tile_vectors<ROWS>(vectors - v0);
    [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
      ((nv == Ns + 1 ? grid_tile<Taps, ROWS, Ns + 1>(K, w, off, xpad + 16 * v0, output, v0, epilogue) : void()), ...);
    }(std::make_integer_sequence<int, kTileVectors<ROWS>>());
    v0 += nv;
  }
}

// grid_rows for a block of `rows` output channels: 8, or a thin group's 1, 2 or 4. The epilogue
// reads no C and adds no column bias.
template <class Taps = F32Taps, class Output>
void grid_block(int64_t rows, int64_t vectors, int64_t K, const int64_t* off, const typename Taps::Weight* w,
                const typename Taps::Value* xpad, const Output& output, const gemm_detail::VectorEpilogue& epilogue) {
  EMBER_CHECK(!epilogue.reads_columns(), "grid_block: the grid's epilogue takes no C and no column bias");
  if (rows == 8) grid_rows<Taps, 8>(vectors, K, off, w, xpad, output, epilogue);
  else if (rows == 4) grid_rows<Taps, 4>(vectors, K, off, w, xpad, output, epilogue);
  else if (rows == 2) grid_rows<Taps, 2>(vectors, K, off, w, xpad, output, epilogue);
  else grid_rows<Taps, 1>(vectors, K, off, w, xpad, output, epilogue);
}

// Note [bf16 on the grid]: where the CPU's vdpbf16ps is no faster than its FMA (and for the strided
// input gradient everywhere), the grid is an f32 workspace whatever the tensors hold; elsewhere
// bf16 multiplies in pairs (Note [bf16 pairs on the grid], Note [bf16 weight gradient on position
// pairs] in conv_grid_avx512.cpp), whose sums differ from these in order only. A widened bf16 layer
// widens its input planes (exactly) while they are copied into the grid, which every layer does
// anyway, runs the f32 tiles, and rounds each output once as the tile stores it (PlanesOutput;
// the strided input gradient, once it copies its phases out); its weights (and bias) are widened
// once per call. So a bf16 pass costs what the f32
// pass costs, where im2col + GEMM in bf16 paid for building, packing and folding columns of
// short rows (MNIST's layers, SE-ResNeXt's grouped 3 x 3s), and its result is the f32 pass's on
// the widened inputs, rounded once: bit for bit the same as running the f32 pass and converting.
// The grid takes bf16 where AVX512-BW and -VL load and store the 16-bit lanes under a mask.
#if defined(__AVX512BW__) && defined(__AVX512VL__)
inline constexpr bool kGridTakesBf16 = true;
#else
inline constexpr bool kGridTakesBf16 = false;
#endif

// Note [f16 on the grid]: f16 has no GEMM of its own on these CPUs, so an f16 convolution was
// the f32 one on widened copies of its operands, rounded once (ops/conv.cpp), and the copies
// around the convolutions took 13% of an f16 MNIST step (perf, batch 128). The passes that the
// grid runs now take f16 as a widened bf16 layer does: activations and gradients widened into the
// f32 workspace as they are laid out (vcvtph2ps, the scalar conversion's bits: widen_half_lanes),
// each result rounded once as the tile stores it or as the f32 sums are copied out (half_lanes),
// weights widened once per call. Each result is the old one bit for bit (the same f32 pass on the
// same widened values, rounded once). A pass whose operands are not finite leaves the grid (Note
// [Non-finite values on the grid] in conv.cpp) and runs f32's on widened copies; so do the
// layers the grid does not suit, at the op (cpu::conv2d_takes_f16).
inline constexpr bool kGridTakesF16 = kGridTakesBf16;  // the same 16-bit lanes

// Calls f(TypeTag<T>{}) for the element type of a grid pass's activations: f32, bf16 or f16.
template <class F>
void dispatch_grid(DType dtype, F&& f) {
  if constexpr (kGridTakesBf16) {
    if (dtype == DType::bf16) return f(TypeTag<BFloat16>{});
    if (dtype == DType::f16) return f(TypeTag<Half>{});
  }
  EMBER_CHECK(dtype == DType::f32, "conv2d on the padded grid: expected f32, bf16 or f16 tensors, got ",
              dtype_name(dtype));
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
