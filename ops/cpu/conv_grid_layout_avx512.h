// The padded grid's layout, shared by the convolution passes on it (ops/cpu/conv_grid_avx512.cpp:
// the forward, Note [Direct forward on a padded grid]; conv_grid_weight_grad_avx512.cpp: the
// weight gradient): the Grid of one (image, group), the copies that lay an image's planes out on
// it (widened to f32 or as bf16 bits), which layers suit it, and how its tasks split. Included by
// AVX-512 sources only.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/conv_geometry.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_grid_tiles_avx512.h"

namespace ember::cpu::grid_detail {

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

inline Grid grid_of(const Conv2dGeometry& g, int64_t slots) {
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
inline Grid grid_of(const Conv2dGeometry& g) { return grid_of(g, g.in_channels_per_group()); }

// dst[j] = src[j * 2] for j < count, reading src only below 2 count - 1 (a row's last column).
inline void copy_every_other(const float* src, float* dst, int64_t count) {
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

// The same from f16 into an f32 grid (Note [f16 on the grid]): the even elements, each lane's low
// half, narrowed to 16 halves and widened as load_widened widens them. Reads src only below
// 2 count - 1.
inline void copy_every_other(const Half* src, float* dst, int64_t count) {
  for (int64_t j = 0; j < count; j += 16) {
    const int64_t n = std::min<int64_t>(16, count - j);
    const __mmask32 halves = __mmask32((uint64_t(1) << (2 * n - 1)) - 1);
    const __mmask16 lanes = __mmask16((1u << n) - 1);
    const __m512i pairs = _mm512_maskz_loadu_epi16(halves, src + 2 * j);
    _mm512_mask_storeu_ps(dst + j, lanes, widen_half_lanes(_mm512_maskz_cvtepi32_epi16(0xFFFF, pairs)));
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
                     if (sw == 2) copy_every_other(from, to, width);  // f32, and 16-bit where the grid takes it
                     else for (int64_t j = 0; j < width; ++j) to[j] = D(from[j * sw]);
                   }
                 });
}

inline int64_t round_up(int64_t n, int64_t step) { return (n + step - 1) / step * step; }
inline int64_t round_up_16(int64_t n) { return round_up(n, 16); }

// Note [Grid tasks]: a task is an (image, group) in the forward and a group in the weight
// gradient. Where that gives fewer than two tasks per thread (few groups, a batch of one), each
// is cut further into blocks of a multiple of 8 output channels (the tiles' rows), into about
// threads / gcd(tasks, threads) blocks, so that an even cut gives each thread the same work (an
// ungrouped layer: one block per thread), since every block lays out its own copy of the grid.
// Cutting into blocks of 8 always laid out an ungrouped layer's grid 4 times at 32 channels, even
// on one thread: the copies were 30% of MNIST's 16 -> 32 weight gradient (perf). Rows are tiled
// from the group's first row either way, so the cut changes no bits. Output channels per task:
// all M, or a multiple of 8 (the last block of a group may have fewer).
inline int64_t rows_per_task(int64_t tasks, int64_t M) {
  const int64_t threads = num_threads();
  if (tasks >= 2 * threads) return M;
  const int64_t blocks = (M + kRows - 1) / kRows;
  const int64_t splits = std::min(blocks, threads / std::gcd(tasks, threads));
  return std::min(M, kRows * ((blocks + splits - 1) / splits));
}

// Note [Strided grid]: grouped layers only (an ungrouped strided layer was not measured against
// im2col + GEMM), and dilation 1, so that a channel's taps read min(stride, kernel) phases a side.
inline bool stride_fits(const Conv2dGeometry& g) {
  return (g.stride_h == 1 && g.stride_w == 1) || (g.groups > 1 && g.dilation_h == 1 && g.dilation_w == 1);
}
// Note [Thin groups on the grid]: 1 or 2 output channels per group, and 4 at a stride (at stride
// 1 the row kernel, measured against, keeps groups of 4).
inline bool thin_fits(const Conv2dGeometry& g) {
  const int64_t M = g.out_channels_per_group();
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  return g.groups > 1 && (M == 1 || M == 2 || (M == 4 && strided));
}

}  // namespace ember::cpu::grid_detail
#endif
