// The direct forward of a convolution on a padded grid (ops/cpu/conv_direct.h), f32 on AVX-512
// (bf16 tensors widened into the f32 grid, Note [bf16 on the grid] in conv_grid_tiles_avx512.h,
// or multiplied in pairs, Note [bf16 pairs on the grid] below):
//   x (N, G*cg, H, W), w (G*M, cg, kH, kW), bias (G*M) or none -> y (N, G*M, Ho, Wo),
//   M % 8 == 0, or a thin group's M of 1, 2 (or 4 at a stride; Note [Thin groups on the grid]),
//   y[n, g*M + m, oh, ow] = act(bias + sum over (c, kh, kw) of w[g*M + m, c, kh, kw] *
//                               x[n, g*cg + c, oh sh - pad_h + kh*dil_h, ow sw - pad_w + kw*dil_w])
// and its weight gradient, dy (N, G*M, Ho, Wo) -> dw (G*M, cg, kH, kW):
//   dw[g*M + m, c, kh, kw] = sum over (n, oh, ow) of dy[n, g*M + m, oh, ow] * (the same x)
//
// Note [Direct forward on a padded grid]: a task is one (image, group) (or a block of its channels,
// Note [Grid tasks]). It copies the group's input planes into a zero-padded workspace of Hp x Wp
// planes (Wp = W + both paddings), so that output (oh, ow) at grid position j = oh Wp + ow reads
// tap (c, kh, kw) at xpad + off(c, kh, kw) + j with off = c Hp Wp + kh dil_h Wp + kw dil_w: the
// same offset for every output, and the outputs of consecutive rows lie side by side (the Wp - Wo
// grid columns between them are computed and thrown away). The group's product is then a GEMM whose
// B needs no packing: row k = (c, kh, kw) of B is xpad + off(k), read as plain unaligned vectors.
// The register tile is the GEMM's (Note [GEMM register tile]): 8 output channels x 48 grid
// positions in 24 accumulators, each k step 3 loads of xpad, 8 broadcasts of w and 24 FMAs, with no
// masks and no border tests. The row kernel (Note [Direct grouped forward]) puts one output row in
// a vector, so SE-ResNeXt's 7- and 14-wide rows left 9 or 2 of 16 lanes idle and each weight fed
// one FMA; here 14 x 14 uses 196 of 224 grid lanes, 7 x 7 49 of 64. Outputs are computed on a grid
// buffer with the GEMM's epilogue (bias, ReLU) and their Wo-wide rows copied to y. Each output sums
// its taps in (c, kh, kw) order from zero, as the row kernel and the transposed problem of the
// input gradient do, whatever the thread count.
//
// Note [Strided grid]: at stride (sh, sw) the outputs of a row read every sw-th input column, so
// no single offset per tap maps grid positions to inputs. Each input channel is laid out as
// phase planes instead: plane (p, q) holds the padded input's rows p + sh i and columns q + sw j
// (p < min(sh, kH), q < min(sw, kW); dilation 1), each Hp x Wp with Wp = Wo + (kW - 1) / sw and
// Hp = Ho + (kH - 1) / sh. Padded pixel (oh sh + kh, ow sw + kw), which tap (kh, kw) of output
// (oh, ow) reads, is element (oh + kh / sh, ow + kw / sw) of plane (kh % sh, kw % sw): again an
// offset per tap, the same for every output at j = oh Wp + ow. So the tiles, the epilogue and the
// weight gradient's sums run unchanged; only the layout (pad_planes, a deinterleaving copy at
// sw = 2) and the offsets differ. At stride 1 there is one plane, the layout above. Used for
// grouped layers (the stride-2 3x3 of SE-ResNeXt's downsampling blocks), where it replaces
// im2col + GEMM; the input gradient of a strided layer is not a forward on this grid, but phase
// forwards on dy's (Note [Strided input gradient as phase forwards] in
// conv_grid_input_grad_avx512.cpp).
//
// Note [Weight gradient on a padded grid]: dw[m, k] is the dot product over (image, grid position
// j) of dy on the grid (zero at the thrown-away positions) with xpad + off(k) + j. A task is one
// group (or a block of its channels, Note [Grid tasks]): it lays out the images' padded input
// planes and dy on the grid in its workspace, a chunk of at most 1 MiB of images at a time (a whole
// batch of 8 at SE-ResNeXt's shapes; the chunk stays in L2), then runs tiles of 8 output channels x
// 3 taps (4 x 6 for the last 4 channels of a group whose count is not a multiple of 8) as 24
// accumulators of 16 grid positions, and adds each accumulator's lane sum into its weight at the
// end of a chunk. Each vector step of an 8 x 3 tile loads 8 vectors of dy (aligned) and 3 of xpad
// (at the taps' offsets, so unaligned: 15 in 16 straddle two cache lines) for 24 FMAs; 4 x 6 loads
// 4 and 6: 8 x 3 measured 1.3-1.4x faster than 4 x 6 at 28 x 28, 14 x 14 and 7 x 7 (one thread,
// Zen 4, alternated pairs). The loads set the pace (Note [One load per vector]). The task alone
// writes its weights, chunk after chunk in a fixed order (the chunk sized by the group, not the
// task): no partial buffers, no atomics, the same bits at any thread count that keeps the layer
// on the grid.
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/gemm_microkernel.h"
#include "ops/kernels.h"

#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
namespace {

using grid_detail::copy_rows;
using grid_detail::dispatch_grid;

constexpr int kRows = 8;  // output channels per register tile (Note [Thin groups on the grid]: 1, 2 or 4 too)

// The padded grid of one (image, group): each input slot's phase planes (Note [Strided grid]) of
// hp x wp, `vectors` 16-wide vectors of outputs per output channel (Ho rows of wp, rounded up),
// and the offsets of the K taps. A slot is an input channel, or a pair of them on the bf16 pair
// grid (Note [bf16 pairs on the grid]); offsets and sizes count the grid's 4-byte elements.
struct Grid {
  int64_t hp, wp, plane, vectors, K;
  int64_t phases_h, phases_w;  // phase planes per slot along each axis: 1 at stride 1
  int64_t channel;             // elements per slot: its phase planes
  int64_t floats;              // of the padded input, with the zeroed slack the last vectors read past
  std::vector<int64_t> off;    // tap (slot, kh, kw) of output j reads xpad[off[k] + j]
};

Grid grid_of(const Conv2dGeometry& g, int64_t slots) {
  Grid grid;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  grid.phases_h = std::min(sh, g.kernel_h);  // dilation 1 wherever the stride is not (conv2d_grid_forward_suits)
  grid.phases_w = std::min(sw, g.kernel_w);
  grid.wp = g.out_w + g.dilation_w * (g.kernel_w - 1) / sw;  // at stride 1: W + pad_w + the right padding
  grid.hp = g.out_h + g.dilation_h * (g.kernel_h - 1) / sh;
  grid.plane = grid.hp * grid.wp;
  grid.channel = grid.phases_h * grid.phases_w * grid.plane;
  grid.vectors = (g.out_h * grid.wp + 15) / 16;
  grid.K = slots * g.kernel_h * g.kernel_w;
  int64_t last_tap = 0;
  for (int64_t c = 0; c < slots; ++c)
    for (int64_t kh = 0; kh < g.kernel_h; ++kh)
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t rh = kh * g.dilation_h, rw = kw * g.dilation_w;  // the tap's padded offsets
        grid.off.push_back(c * grid.channel + (rh % sh * grid.phases_w + rw % sw) * grid.plane + rh / sh * grid.wp +
                           rw / sw);
        last_tap = std::max(last_tap, grid.off.back());
      }
  grid.floats = std::max(slots * grid.channel, last_tap + 16 * grid.vectors);
  return grid;
}
Grid grid_of(const Conv2dGeometry& g) { return grid_of(g, g.in_channels_per_group()); }

// dst[j] = src[j * 2] for j < count, reading src only below 2 count - 1 (a row's last column).
void copy_every_other(const float* src, float* dst, int64_t count) {
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const __m512 lo = _mm512_loadu_ps(src + 2 * j), hi = _mm512_maskz_loadu_ps(0x7FFF, src + 2 * j + 16);
    _mm512_storeu_ps(dst + j, _mm512_permutex2var_ps(lo, evens, hi));
  }
  for (; j < count; ++j) dst[j] = src[2 * j];
}

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// The same from bf16: each 32-bit lane of a load holds an even element in its low half
// (little-endian), which shifted up is that element as f32, and truncated to 16 bits its bits.
// Reads src only below 2 count - 1.
template <class D>
void copy_every_other(const BFloat16* src, D* dst, int64_t count) {
  for (int64_t j = 0; j < count; j += 16) {
    const int64_t n = std::min<int64_t>(16, count - j);
    const __mmask32 halves = __mmask32((uint64_t(1) << (2 * n - 1)) - 1);
    const __mmask16 lanes = __mmask16((1u << n) - 1);
    const __m512i pairs = _mm512_maskz_loadu_epi16(halves, src + 2 * j);
    if constexpr (std::is_same_v<D, float>)
      _mm512_mask_storeu_ps(dst + j, lanes, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, pairs, 16)));
    else
      _mm512_mask_cvtepi32_storeu_epi16(dst + j, lanes, pairs);
  }
}
#endif

// Zeroes xpad (Grid layout) and copies each slot's part of the padded input into it: for every
// slot and phase plane, copy(slot, src, dst, rows, width) with src the offset of the first
// value in the slot's input planes (rows sh in_w apart, values sw apart) and dst where it goes
// (rows wp apart). Note [Strided grid]: at stride (sh, sw) phase plane (ph, pw) of a slot holds
// the padded input's rows ph + sh i and columns pw + sw j.
template <class D, class Copy>
void lay_out_planes(const Conv2dGeometry& g, const Grid& grid, int64_t slots, D* xpad, Copy copy) {
  std::fill(xpad, xpad + grid.floats, D(0));
  const int64_t sh = g.stride_h, sw = g.stride_w;
  for (int64_t c = 0; c < slots; ++c)
    for (int64_t ph = 0; ph < grid.phases_h; ++ph)
      for (int64_t pw = 0; pw < grid.phases_w; ++pw) {
        const Range rows = valid_outputs(ph - g.pad_h, sh, g.in_h, grid.hp);
        const Range columns = valid_outputs(pw - g.pad_w, sw, g.in_w, grid.wp);
        const int64_t width = columns.end - columns.begin;
        if (rows.end <= rows.begin || width <= 0) continue;
        const int64_t src = (ph + sh * rows.begin - g.pad_h) * g.in_w + (pw + sw * columns.begin - g.pad_w);
        D* dst =
            xpad + c * grid.channel + (ph * grid.phases_w + pw) * grid.plane + rows.begin * grid.wp + columns.begin;
        copy(c, src, dst, rows.end - rows.begin, width);
      }
}

// Copies the group's input planes of one image into xpad: widened to f32 (D float, Note [bf16 on
// the grid]), or as bf16 bits (D BFloat16, Note [bf16 weight gradient on position pairs]).
template <class T, class D>
void pad_planes(const Conv2dGeometry& g, const Grid& grid, const T* x_group, D* xpad) {
  const int64_t sh = g.stride_h, sw = g.stride_w;
  lay_out_planes(g, grid, g.in_channels_per_group(), xpad,
                 [&](int64_t c, int64_t src_offset, D* dst, int64_t rows, int64_t width) {
                   const T* src = x_group + c * g.in_plane() + src_offset;
                   if (sw == 1) return copy_rows(src, sh * g.in_w, dst, grid.wp, rows, width);
                   for (int64_t i = 0; i < rows; ++i) {
                     const T* from = src + i * sh * g.in_w;
                     D* to = dst + i * grid.wp;
                     if (sw == 2) copy_every_other(from, to, width);  // f32, and bf16 where the grid takes it
                     else for (int64_t j = 0; j < width; ++j) to[j] = D(from[j * sw]);
                   }
                 });
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// dst[j] = a[j sw] | b[j sw] << 16 for j < width (as bit patterns; b null: 0): two channels'
// values of one row side by side in 32-bit lanes. At sw 1 and 2 in vectors (at 2 each 32-bit lane
// of a load holds the even element in its low half), reading a and b only below (width - 1) sw + 1.
void pair_row(const BFloat16* a, const BFloat16* b, int64_t sw, uint32_t* dst, int64_t width) {
  if (sw > 2) {
    for (int64_t j = 0; j < width; ++j) dst[j] = uint32_t(a[j * sw].bits) | (b ? uint32_t(b[j * sw].bits) << 16 : 0u);
    return;
  }
  for (int64_t j = 0; j < width; j += 16) {
    const int64_t n = std::min<int64_t>(16, width - j);
    const __mmask16 lanes = __mmask16((1u << n) - 1);
    __m512i low, high = _mm512_setzero_si512();
    if (sw == 1) {
      low = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, a + j));
      if (b) {
        const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, b + j));
        high = _mm512_maskz_slli_epi32(0xFFFF, wide, 16);
      }
    } else {
      const __mmask32 halves = __mmask32((uint64_t(1) << (2 * n - 1)) - 1);
      low = _mm512_maskz_and_epi32(0xFFFF, _mm512_maskz_loadu_epi16(halves, a + 2 * j), _mm512_set1_epi32(0xFFFF));
      if (b) high = _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_loadu_epi16(halves, b + 2 * j), 16);
    }
    _mm512_mask_storeu_epi32(dst + j, lanes, _mm512_or_si512(low, high));
  }
}

// Note [bf16 pairs on the grid]: where vdpbf16ps outruns the FMA (Note [Widened bf16 GEMM] in
// gemm_packed_bf16.cpp: twice the multiply-adds on Zen 5), a bf16 forward multiplies on the grid
// in pairs rather than widening: slot p of the grid holds input channels 2p and 2p + 1 side by
// side in each 32-bit lane (the second 0 past an odd count), so the taps (2p, kh, kw) and
// (2p + 1, kh, kw), which share every offset, are one vdpbf16ps step, with weight pairs laid out
// alike. Half the k steps, and the grid holds bf16 bits, never widened. Each output sums its
// products in f32 in (pair, kh, kw) order, whatever the thread count; the sums differ from the
// widened f32 ones in order only, and vdpbf16ps treats subnormal bf16 inputs as zero (as oneDNN's
// bf16 convolutions do). The weight gradient pairs positions instead (Note [bf16 weight gradient
// on position pairs]); the strided input gradient's phase forwards stay widened.
void pad_pairs(const Conv2dGeometry& g, const Grid& grid, const BFloat16* x_group, uint32_t* xpad) {
  const int64_t sh = g.stride_h, sw = g.stride_w, cg = g.in_channels_per_group();
  lay_out_planes(g, grid, (cg + 1) / 2, xpad,
                 [&](int64_t p, int64_t src_offset, uint32_t* dst, int64_t rows, int64_t width) {
                   const BFloat16* a = x_group + 2 * p * g.in_plane() + src_offset;
                   const BFloat16* b = 2 * p + 1 < cg ? a + g.in_plane() : nullptr;
                   for (int64_t i = 0; i < rows; ++i)
                     pair_row(a + i * sh * g.in_w, b ? b + i * sh * g.in_w : nullptr, sw, dst + i * grid.wp, width);
                 });
}

// The weight pairs of every output channel in the pair grid's tap order: (Cout, slots kH kW).
Tensor weight_pairs(const Conv2dGeometry& g, const float* w, int64_t slots) {
  const int64_t cg = g.in_channels_per_group(), taps = g.kernel_h * g.kernel_w;
  const Tensor pairs = Tensor::empty({g.out_channels * slots * taps}, {.dtype = DType::i32});
  uint32_t* out = reinterpret_cast<uint32_t*>(pairs.data<int32_t>());
  for (int64_t o = 0; o < g.out_channels; ++o)
    for (int64_t p = 0; p < slots; ++p)
      for (int64_t t = 0; t < taps; ++t) {
        const float lo = w[(o * cg + 2 * p) * taps + t];
        const float hi = 2 * p + 1 < cg ? w[(o * cg + 2 * p + 1) * taps + t] : 0.0f;
        out[(o * slots + p) * taps + t] =
            uint32_t(float_to_bfloat16_bits(lo)) | uint32_t(float_to_bfloat16_bits(hi)) << 16;
      }
  return pairs;
}
#endif

// Images laid out on the grid at a time, in bytes (they stay in L2 while every tile reads them).
constexpr int64_t kGradChunkBytes = int64_t(1) << 20;

// The lane sums of a, b, c and d: each folds its halves down to 4 lanes, and two rounds of
// horizontal adds finish all four at once (a tile ends with 24 sums over as few as 32 vector
// steps at 7 x 7, so a lane-by-lane sum cost as much as the FMAs).
__m128 lane_sums(__m512 a, __m512 b, __m512 c, __m512 d) {
  // The masked forms of the shuffle and extract: GCC 12's plain ones take an "undefined" source
  // that its -Wuninitialized flags at every use.
  auto fold = [](__m512 v) {
    v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, _MM_SHUFFLE(3, 2, 3, 2)));  // 8 lanes
    v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, _MM_SHUFFLE(1, 1, 1, 1)));  // 4 lanes
    return _mm512_mask_extractf32x4_ps(_mm_setzero_ps(), 0xF, v, 0);
  };
  return _mm_hadd_ps(_mm_hadd_ps(fold(a), fold(b)), _mm_hadd_ps(fold(c), fold(d)));
}

// The layout of a chunk of images on the grid: per image, its padded input planes (image_x
// values) and dy (M rows of ld values, image_dy); the images of a chunk side by side. V: float, or
// bf16 on position pairs (Note [bf16 weight gradient on position pairs]).
template <class V>
struct GradChunk {
  int64_t images, vectors, ld, image_dy, image_x;
  const V* dyg;
  const V* xpad;
};

// What a weight-gradient step multiplies: 16 f32 grid positions, one FMA a lane; or 32 bf16 grid
// positions, two side by side in each 32-bit lane, one vdpbf16ps (Note [bf16 weight gradient on
// position pairs]).
struct F32Positions {
  using Value = float;
  static constexpr int kPerVector = 16;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_aligned(const float* p) { return _mm512_load_ps(p); }
  static __m512 multiply_add(__m512 acc, __m512 d, __m512 x) { return _mm512_fmadd_ps(d, x, acc); }
};
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Note [bf16 weight gradient on position pairs]: the weight gradient's sums run along the grid
// positions (dw[m, k] = sum over j of dy[m, j] xpad[off(k) + j]), so a bf16 grid pairs positions
// rather than channels: the input planes and dy are laid out as bf16 bits, unwidened, and a
// 512-bit load at any offset holds 32 consecutive positions, two to a 32-bit lane, the same pairs
// in dy and in every tap's x. One vdpbf16ps then adds two positions' products per lane: half the
// steps of the widened grid, from half the bytes. The sums differ from the widened ones in order,
// and vdpbf16ps treats subnormal bf16 inputs as zero.
struct Bf16PositionPairs {
  using Value = BFloat16;
  static constexpr int kPerVector = 32;
  static __m512i load(const BFloat16* p) { return _mm512_loadu_si512(p); }
  static __m512i load_aligned(const BFloat16* p) { return _mm512_load_si512(p); }
  static __m512 multiply_add(__m512 acc, __m512i d, __m512i x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)d, (__m512bh)x);
  }
};
#endif

// Note [One load per vector]: GCC 12 folded the load of each dy vector into all NT of its FMAs
// as a memory operand (and, in the 4-row tiles, each x vector into its 4), so an 8 x 3 step
// issued 27 vector loads for 24 FMAs, and Zen 4 does one 512-bit load a cycle: the loads, not
// the FMAs, set the pace (perf: a load in every FMA of the loop). An empty asm that claims to
// change a loaded value makes it a register that its FMAs share.
template <class Vector>
inline void keep_in_register(Vector& v) {
  asm("" : "+v"(v));
}

// dw[i][t] (+)= the sums for the ROWS rows of the chunk's dy starting at row m0 and its NT taps
// off[t]; dw rows K apart. The first chunk stores, later ones add.
template <class Positions, int ROWS, int NT>
void grad_tile(const GradChunk<typename Positions::Value>& chunk, int64_t m0, const int64_t* off, float* dw,
               int64_t K, bool accumulate) {
  using V = typename Positions::Value;
  using Vector = decltype(Positions::load(chunk.xpad));
  constexpr int kStep = Positions::kPerVector;
  const int64_t images = chunk.images, vectors = chunk.vectors, ld = chunk.ld, image_dy = chunk.image_dy;
  const int64_t image_x = chunk.image_x;
  const V* dyg = chunk.dyg + m0 * ld;
  const V* xpad = chunk.xpad;
  __m512 acc[ROWS][NT];
  gemm_detail::zero_tile(acc);
  for (int64_t n = 0; n < images; ++n) {
    const V* d = dyg + n * image_dy;
    const V* x = xpad + n * image_x;
    for (int64_t v = 0; v < vectors; ++v) {
      Vector xv[NT];
#pragma GCC unroll 6
      for (int t = 0; t < NT; ++t) {
        xv[t] = Positions::load(x + off[t] + kStep * v);
        keep_in_register(xv[t]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < ROWS; ++i) {
        Vector dv = Positions::load_aligned(d + i * ld + kStep * v);
        keep_in_register(dv);
#pragma GCC unroll 6
        for (int t = 0; t < NT; ++t) acc[i][t] = Positions::multiply_add(acc[i][t], dv, xv[t]);
      }
    }
  }
  auto add = [&](int i, int t, float sum) {
    float& w = dw[i * K + t];
    w = accumulate ? w + sum : sum;
  };
  if constexpr (ROWS % 4 == 0) {
#pragma GCC unroll 9
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 2
      for (int i0 = 0; i0 < ROWS; i0 += 4) {
        alignas(16) float sums[4];
        _mm_store_ps(sums, lane_sums(acc[i0][t], acc[i0 + 1][t], acc[i0 + 2][t], acc[i0 + 3][t]));
        for (int i = 0; i < 4; ++i) add(i0 + i, t, sums[i]);
      }
  } else {  // a thin group's 1 or 2 rows: its ROWS * NT sums four at a time, the last four padded
    constexpr int kSums = ROWS * NT, kPadded = (kSums + 3) / 4 * 4;
    __m512 flat[kPadded];
#pragma GCC unroll 12
    for (int r = 0; r < kPadded; ++r) flat[r] = r < kSums ? acc[r / NT][r % NT] : _mm512_setzero_ps();
#pragma GCC unroll 3
    for (int r = 0; r < kPadded; r += 4) {
      alignas(16) float sums[4];
      _mm_store_ps(sums, lane_sums(flat[r], flat[r + 1], flat[r + 2], flat[r + 3]));
      for (int q = 0; q < 4 && r + q < kSums; ++q) add((r + q) / NT, (r + q) % NT, sums[q]);
    }
  }
}

// The tiles of rows [m0, m0 + ROWS) x every tap, NT taps at a time (the last tile narrower).
template <class Positions, int ROWS, int NT>
void grad_rows(const GradChunk<typename Positions::Value>& chunk, int64_t m0, const int64_t* off, float* dw, int64_t K,
               bool accumulate) {
  int64_t k0 = 0;
  for (; k0 + NT <= K; k0 += NT) grad_tile<Positions, ROWS, NT>(chunk, m0, off + k0, dw + k0, K, accumulate);
  if constexpr (NT > 1) {
    if (k0 < K) {
      // One narrower tile for the K % NT taps left.
      [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
        ((K - k0 == Ns + 1 ? grad_tile<Positions, ROWS, Ns + 1>(chunk, m0, off + k0, dw + k0, K, accumulate)
                           : void()),
         ...);
      }(std::make_integer_sequence<int, NT - 1>());
    }
  }
}

int64_t round_up(int64_t n, int64_t step) { return (n + step - 1) / step * step; }
int64_t round_up_16(int64_t n) { return round_up(n, 16); }

// Note [Grid tasks]: a task is an (image, group) in the forward and a group in the weight
// gradient. Where that gives fewer than two tasks per thread (few groups, a batch of one), each
// is cut further into blocks of a multiple of 8 output channels (the tiles' rows), into about
// threads / gcd(tasks, threads) blocks, so that an even cut gives each thread the same work (an
// ungrouped layer: one block per thread), since every block lays out its own copy of the grid.
// Cutting into blocks of 8 always laid out an ungrouped layer's grid 4 times at 32 channels, even
// on one thread: the copies were 30% of MNIST's 16 -> 32 weight gradient (perf). Rows are tiled
// from the group's first row either way, so the cut changes no bits. Output channels per task:
// all M, or a multiple of 8 (the last block of a group may have fewer).
int64_t rows_per_task(int64_t tasks, int64_t M) {
  const int64_t threads = num_threads();
  if (tasks >= 2 * threads) return M;
  const int64_t blocks = (M + kRows - 1) / kRows;
  const int64_t splits = std::min(blocks, threads / std::gcd(tasks, threads));
  return std::min(M, kRows * ((blocks + splits - 1) / splits));
}

}  // namespace

namespace {
// Note [Strided grid]: grouped layers only (an ungrouped strided layer was not measured against
// im2col + GEMM), and dilation 1, so that a channel's taps read min(stride, kernel) phases a side.
bool stride_fits(const Conv2dGeometry& g) {
  return (g.stride_h == 1 && g.stride_w == 1) || (g.groups > 1 && g.dilation_h == 1 && g.dilation_w == 1);
}
// Note [Thin groups on the grid]: 1 or 2 output channels per group, and 4 at a stride (at stride
// 1 the row kernel, measured against, keeps groups of 4).
bool thin_fits(const Conv2dGeometry& g) {
  const int64_t M = g.out_channels_per_group();
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  return g.groups > 1 && (M == 1 || M == 2 || (M == 4 && strided));
}
}  // namespace

bool conv2d_grid_forward_suits(const Conv2dGeometry& g) {
  return stride_fits(g) && (g.out_channels_per_group() % kRows == 0 || thin_fits(g));
}

bool conv2d_grid_takes(DType dtype) {
  return dtype == DType::f32 || (dtype == DType::bf16 && grid_detail::kGridTakesBf16);
}

bool conv2d_grid_forward_suits(const Conv2dGeometry& g, DType dtype) {
  if (!conv2d_grid_takes(dtype)) return false;
  // Note [bf16 on the grid]: bf16 has no row kernel, so its groups of 4 at stride 1 take the
  // grid's 4-row tiles (Note [Thin groups on the grid]) rather than im2col + GEMM.
  const bool bf16_group_of_4 = dtype == DType::bf16 && g.groups > 1 && g.out_channels_per_group() == 4;
  return conv2d_grid_forward_suits(g) || (bf16_group_of_4 && stride_fits(g));
}

namespace {

// t as f32: t itself, or a widened copy (Note [bf16 on the grid]).
Tensor as_f32(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::f32) return t;
  const Tensor wide = Tensor::empty(t.shape(), {.dtype = DType::f32});
  copy(t, wide);
  return wide;
}

// The forward's tasks (Note [Grid tasks]) on a grid of Taps::Value elements (4 bytes, like the
// f32 outputs that share the workspace): lay_out(n, grp, xpad) lays out a task's grid; w holds
// each output channel's K weights in the grid's tap order; outputs rounded once into y.
template <class Taps, class T, class LayOut>
void grid_forward(const Conv2dGeometry& g, const Grid& grid, const typename Taps::Weight* wp, const float* bp,
                  Activation act, T* yp, LayOut lay_out) {
  static_assert(sizeof(typename Taps::Value) == sizeof(float));
  const int64_t M = g.out_channels_per_group(), Wo = g.out_w;
  const int64_t K = grid.K, ld = 16 * grid.vectors;  // grid buffer: M rows of ld outputs
  const int64_t tile = std::min<int64_t>(M, kRows);  // Note [Thin groups on the grid]
  const int64_t workspace = round_up_16(grid.floats) + M * ld;
  const int64_t rows = rows_per_task(g.batch * g.groups, M), splits = (M + rows - 1) / rows;  // Note [Grid tasks]
  parallel_for(0, g.batch * g.groups * splits, 1, [&](int64_t t0, int64_t t1) {
    const Tensor buffer = Tensor::empty({workspace}, {.dtype = DType::f32});
    auto* xpad = reinterpret_cast<typename Taps::Value*>(buffer.data<float>());
    float* out = buffer.data<float>() + round_up_16(grid.floats);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / (g.groups * splits), grp = t / splits % g.groups, m_begin = t % splits * rows;
      const int64_t m_end = std::min(M, m_begin + rows);
      lay_out(n, grp, xpad);
      for (int64_t m0 = m_begin; m0 < m_end; m0 += tile) {
        const gemm_detail::VectorEpilogue epilogue(
            {.alpha = 1.0f, .beta = 0.0f, .act = act, .row_bias = bp ? bp + grp * M + m0 : nullptr});
        grid_detail::grid_block<Taps>(tile, grid.vectors, K, grid.off.data(), wp + (grp * M + m0) * K, xpad,
                                      out + m0 * ld, ld, epilogue);
      }
      // The Wo outputs of each grid row go to y.
      T* y_group = yp + (n * g.out_channels + grp * M) * g.out_plane();
      for (int64_t m = m_begin; m < m_end; ++m)
        copy_rows(out + m * ld, grid.wp, y_group + m * g.out_plane(), Wo, g.out_h, Wo);
    }
  });
}

}  // namespace

bool conv2d_grid_bf16_pairs() {
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // Note [bf16 pairs on the grid]; EMBER_BF16_GEMM=widened widens the grid as it does the GEMM.
  static const bool pairs = [] {
    const char* forced = std::getenv("EMBER_BF16_GEMM");
    return !(forced && std::string_view(forced) == "widened") && gemm_detail::avx512_bf16_dot_outruns_fma();
  }();
  return pairs;
#else
  return false;
#endif
}

void conv2d_grid_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                         const Tensor& y) {
  const Tensor w32 = as_f32(w), b32 = as_f32(b);
  const float* bp = b32.defined() ? b32.data<float>() : nullptr;
  const int64_t cg = g.in_channels_per_group();
  dispatch_grid(x.dtype(), [&]<class T>(TypeTag<T>) {
    const T* xp = x.data<T>();
    auto x_group = [&](int64_t n, int64_t grp) { return xp + (n * g.in_channels + grp * cg) * g.in_plane(); };
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (conv2d_grid_bf16_pairs()) {
        const Grid grid = grid_of(g, (cg + 1) / 2);
        const Tensor pairs = weight_pairs(g, w32.data<float>(), (cg + 1) / 2);
        return grid_forward<grid_detail::Bf16PairTaps>(
            g, grid, reinterpret_cast<const uint32_t*>(pairs.data<int32_t>()), bp, act, y.data<T>(),
            [&](int64_t n, int64_t grp, uint32_t* xpad) { pad_pairs(g, grid, x_group(n, grp), xpad); });
      }
    }
#endif
    const Grid grid = grid_of(g);
    grid_forward<grid_detail::F32Taps>(
        g, grid, w32.data<float>(), bp, act, y.data<T>(),
        [&](int64_t n, int64_t grp, float* xpad) { pad_planes(g, grid, x_group(n, grp), xpad); });
  });
}

bool conv2d_grid_weight_grad_suits(const Conv2dGeometry& g, DType dtype) {
  const int64_t M = g.out_channels_per_group();
  // An ungrouped layer's tasks are blocks of 8 channels or more (Note [Grid tasks]), at most 4:
  // with more threads than that im2col + GEMM, which splits over the images too, keeps them all busy.
  const bool ungrouped_fits = M % 8 == 0 && (M + 7) / 8 >= int64_t(num_threads());
  return conv2d_grid_takes(dtype) && stride_fits(g) && (M % 4 == 0 || thin_fits(g)) && M <= 32 &&
         (g.groups > 1 || ungrouped_fits);
}

namespace {

// The weight gradient's tasks on a grid of Positions::Value: lay_out(n, grp, xpad) lays out an
// image's grid; dy's rows are copied beside it (widened to f32, or as bf16 bits).
template <class Positions, class T, class LayOut>
void grid_weight_grad(const Conv2dGeometry& g, const Grid& grid, const T* dyp, float* dwp, LayOut lay_out) {
  using V = typename Positions::Value;
  constexpr int64_t kStep = Positions::kPerVector;
  const int64_t M = g.out_channels_per_group(), Wo = g.out_w;
  if (g.batch == 0) return std::fill(dwp, dwp + g.out_channels * grid.K, 0.0f);
  const int64_t rows = rows_per_task(g.groups, M), splits = (M + rows - 1) / rows;  // Note [Grid tasks]
  // Per image: the padded input planes, and dy's `rows` rows on the grid, ld values each (whole
  // vectors: the positions past Ho rows of wp are zero in dy).
  const int64_t K = grid.K, vectors = (g.out_h * grid.wp + kStep - 1) / kStep, ld = kStep * vectors;
  const int64_t last_tap = *std::max_element(grid.off.begin(), grid.off.end());
  const int64_t image_x = round_up(std::max(grid.floats, last_tap + ld), kStep), image_dy = rows * ld;
  // The chunk is sized for the whole group's M rows of dy, whatever a task holds: the chunks set
  // the order of the sums, which must not depend on the thread count.
  const int64_t chunk_images =
      std::clamp<int64_t>(kGradChunkBytes / (int64_t(sizeof(V)) * (image_x + M * ld)), 1, g.batch);
  const int64_t buffer_bytes = chunk_images * (image_x + image_dy) * int64_t(sizeof(V));
  parallel_for(0, g.groups * splits, 1, [&](int64_t t0, int64_t t1) {
    const Tensor buffer = Tensor::empty({(buffer_bytes + 3) / 4}, {.dtype = DType::f32});
    V* xpad = reinterpret_cast<V*>(buffer.data<float>());
    V* dyg = xpad + chunk_images * image_x;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t grp = t / splits, m_begin = t % splits * rows, m_end = std::min(M, m_begin + rows);
      for (int64_t n0 = 0; n0 < g.batch; n0 += chunk_images) {
        const int64_t images = std::min(chunk_images, g.batch - n0);
        std::fill(dyg, dyg + images * image_dy, V(0));
        for (int64_t i = 0; i < images; ++i) {
          const int64_t n = n0 + i;
          lay_out(n, grp, xpad + i * image_x);
          // The last vectors of 32 bf16 positions may read past the grid: zeros there, as dy's.
          std::fill(xpad + i * image_x + grid.floats, xpad + (i + 1) * image_x, V(0));
          const T* dy_group = dyp + (n * g.out_channels + grp * M) * g.out_plane();
          for (int64_t m = m_begin; m < m_end; ++m)
            copy_rows(dy_group + m * g.out_plane(), Wo, dyg + i * image_dy + (m - m_begin) * ld, grid.wp, g.out_h, Wo);
        }
        const GradChunk<V> chunk{images, vectors, ld, image_dy, image_x, dyg, xpad};
        const bool accumulate = n0 > 0;
        for (int64_t m0 = m_begin; m0 < m_end;) {
          float* out = dwp + (grp * M + m0) * K;
          const int64_t left = m_end - m0, at = m0 - m_begin;
          if (left >= 8) {  // Note [Weight gradient on a padded grid]: 8 x 3 where it can
            grad_rows<Positions, 8, 3>(chunk, at, grid.off.data(), out, K, accumulate);
            m0 += 8;
          } else if (left >= 4) {
            grad_rows<Positions, 4, 6>(chunk, at, grid.off.data(), out, K, accumulate);
            m0 += 4;
          } else if (left == 2) {  // Note [Thin groups on the grid]
            grad_rows<Positions, 2, 6>(chunk, at, grid.off.data(), out, K, accumulate);
            m0 += 2;
          } else {
            grad_rows<Positions, 1, 9>(chunk, at, grid.off.data(), out, K, accumulate);
            m0 += 1;
          }
        }
      }
    }
  });
}

}  // namespace

void conv2d_grid_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  const int64_t cg = g.in_channels_per_group();
  const Grid grid = grid_of(g);
  dispatch_grid(x.dtype(), [&]<class T>(TypeTag<T>) {
    const T* xp = x.data<T>();
    auto x_group = [&](int64_t n, int64_t grp) { return xp + (n * g.in_channels + grp * cg) * g.in_plane(); };
    auto widened = [&](float* sums) {
      grid_weight_grad<F32Positions>(
          g, grid, dy.data<T>(), sums,
          [&](int64_t n, int64_t grp, float* xpad) { pad_planes(g, grid, x_group(n, grp), xpad); });
    };
    if constexpr (std::is_same_v<T, float>) {
      widened(dw.data<float>());
    } else {  // summed in f32, rounded once (Note [bf16 on the grid])
      const Tensor sums = Tensor::empty(dw.shape(), {.dtype = DType::f32});
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      if (conv2d_grid_bf16_pairs()) {
        grid_weight_grad<Bf16PositionPairs>(
            g, grid, dy.data<T>(), sums.data<float>(),
            [&](int64_t n, int64_t grp, BFloat16* xpad) { pad_planes(g, grid, x_group(n, grp), xpad); });
        return copy(sums, dw);
      }
#endif
      widened(sums.data<float>());
      copy(sums, dw);
    }
  });
}
#else
bool conv2d_grid_takes(DType) { return false; }
bool conv2d_grid_bf16_pairs() { return false; }
bool conv2d_grid_forward_suits(const Conv2dGeometry&, DType) { return false; }
bool conv2d_grid_weight_grad_suits(const Conv2dGeometry&, DType) { return false; }
void conv2d_grid_weight_grad(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
bool conv2d_grid_forward_suits(const Conv2dGeometry&) { return false; }
void conv2d_grid_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation,
                         const Tensor&) {}
#endif

}  // namespace ember::cpu
