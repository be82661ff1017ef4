// The weight gradient of a convolution on a padded grid (ops/cpu/conv_direct.h), f32 on AVX-512
// (bf16 widened into the f32 grid, Note [bf16 on the grid] in conv_grid_tiles_avx512.h, or on
// position pairs, Note [bf16 weight gradient on position pairs] below), on the layout of the
// forward (conv_grid_layout_avx512.h, Note [Direct forward on a padded grid] in
// conv_grid_avx512.cpp):
//   x (N, G*cg, H, W), dy (N, G*M, Ho, Wo) -> dw (G*M, cg, kH, kW),
//   dw[g*M + m, c, kh, kw] = sum over (n, oh, ow) of dy[n, g*M + m, oh, ow] *
//                            x[n, g*cg + c, oh sh - pad_h + kh*dil_h, ow sw - pad_w + kw*dil_w]
//
// Note [Weight gradient on a padded grid]: dw[m, k] is the dot product over (image, grid position
// j) of dy on the grid (zero at the thrown-away positions) with xpad + off(k) + j. A task is one
// group (or a block of its channels, Note [Grid tasks]): it lays out the images' padded input
// planes and dy on the grid in its workspace, a chunk of at most 1 MiB of images at a time (a whole
// batch of 8 at SE-ResNeXt's shapes; the chunk stays in L2), then runs tiles of 8 output channels x
// 3 taps (4 x 6 for the last 4 channels of a group whose count is not a multiple of 8) as 24
// accumulators of 16 grid positions, over spans of the chunk that stay in L1 (Note [Weight
// gradient spans in L1]), and adds the lane sum of each weight's partial vector into it at the
// end of a chunk. Each vector step of an 8 x 3 tile loads 8 vectors of dy (aligned) and 3 of xpad
// (at the taps' offsets, so unaligned: 15 in 16 straddle two cache lines) for 24 FMAs; 4 x 6 loads
// 4 and 6: 8 x 3 measured 1.3-1.4x faster than 4 x 6 at 28 x 28, 14 x 14 and 7 x 7 (one thread,
// Zen 4, alternated pairs). The loads set the pace (Note [One load per vector]). The task alone
// writes its weights, chunk after chunk in a fixed order (the chunk sized by the group, not the
// task): no atomics, the same bits at any thread count that keeps the layer on the grid.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/conv_direct.h"
#include "ops/kernels.h"

#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_layout_avx512.h"
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
namespace {

using namespace grid_detail;  // the layout and tiles of the grid (conv_grid_layout_avx512.h)

// Images laid out on the grid at a time, in bytes (they stay in L2 while every tile reads them).
constexpr int64_t kGradChunkBytes = int64_t(1) << 20;

// The lane sums of a, b, c and d: each folds its halves down to 4 lanes, and two rounds of
// horizontal adds finish all four at once (when each tile ended with its 24 sums, over as few as
// 32 vector steps at 7 x 7, a lane-by-lane sum cost as much as the FMAs).
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

// Note [Weight gradient spans in L1]: a tile reads its 8 rows of dy once per 3 taps, so over
// the K taps of a layer every row of dy is read K / 3 times (48 at MNIST's 16 -> 32 layer). When
// a tile ran over a whole chunk (L2), those reads came from L2 at about 48 bytes a cycle, near its
// bandwidth, and the weight gradient ran at half the FMA peak (`bench kernels`: 0.54 ms for
// MNIST's second layer at batch 64, oneDNN 0.28). So the tiles run over spans of the chunk's
// positions, at most kSpanVectors vectors of dy rows (8 rows x 64 vectors: 32 KiB, beside a few KiB
// of x) that stay in L1 while every tap's tile passes over them; each tile keeps its accumulators
// between spans in a buffer of partial vectors (ROWS x K x 16 floats from the caching allocator,
// in L2), loaded and stored once per span, and the lane sums go into dw at the end of the chunk.
// A span is whole images where an image has fewer vectors than that, else a run of one image's
// vectors; spans are cut from the chunk alone, so the sums' order stays independent of threads.
// MNIST's second layer at batch 64 (convprobe, medians of 300 calls, alternated, us): f32 546-570
// -> 450-483, bf16 305-316 -> 278-281; spans of 32 and 96 vectors measured 5% slower than 64.
constexpr int64_t kSpanVectors = 64;

// Positions [v_begin, v_end) of images [n_begin, n_end) of a chunk.
struct Span {
  int64_t n_begin, n_end, v_begin, v_end;
};

// The chunk's positions cut into spans (Note [Weight gradient spans in L1]).
inline std::vector<Span> spans_of(int64_t images, int64_t vectors) {
  std::vector<Span> spans;
  if (vectors <= kSpanVectors) {
    const int64_t per_span = kSpanVectors / vectors;
    for (int64_t n = 0; n < images; n += per_span) spans.push_back({n, std::min(images, n + per_span), 0, vectors});
  } else {
    for (int64_t n = 0; n < images; ++n)
      for (int64_t v = 0; v < vectors; v += kSpanVectors)
        spans.push_back({n, n + 1, v, std::min(vectors, v + kSpanVectors)});
  }
  return spans;
}

// partial[(i * K + t) * 16 ..] (+)= the lane-wise sums for the ROWS rows of the chunk's dy
// starting at row m0 and its NT taps off[t] over one span; partial rows K vectors apart. The first
// span of a chunk stores, later ones add.
template <class Positions, int ROWS, int NT>
void grad_tile(const GradChunk<typename Positions::Value>& chunk, const Span& span, int64_t m0, const int64_t* off,
               float* partial, int64_t K, bool first) {
  using V = typename Positions::Value;
  using Vector = decltype(Positions::load(chunk.xpad));
  constexpr int kStep = Positions::kPerVector;
  const int64_t ld = chunk.ld, image_dy = chunk.image_dy, image_x = chunk.image_x;
  const V* dyg = chunk.dyg + m0 * ld;
  const V* xpad = chunk.xpad;
  __m512 acc[ROWS][NT];
  gemm_detail::zero_tile(acc);
  for (int64_t n = span.n_begin; n < span.n_end; ++n) {
    const V* d = dyg + n * image_dy;
    const V* x = xpad + n * image_x;
    for (int64_t v = span.v_begin; v < span.v_end; ++v) {
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
#pragma GCC unroll 8
  for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 9
    for (int t = 0; t < NT; ++t) {
      float* p = partial + (i * K + t) * 16;
      _mm512_store_ps(p, first ? acc[i][t] : _mm512_add_ps(_mm512_load_ps(p), acc[i][t]));
    }
}

// dw[i * K + k] (+)= the lane sum of partial vector (i, k), for `rows` rows: the chunk's end. The
// first chunk stores, later ones add.
inline void add_lane_sums(const float* partial, int64_t rows, int64_t K, float* dw, bool accumulate) {
  const int64_t count = rows * K;
  for (int64_t r = 0; r < count; r += 4) {
    __m512 v[4];
    for (int q = 0; q < 4; ++q) v[q] = r + q < count ? _mm512_load_ps(partial + (r + q) * 16) : _mm512_setzero_ps();
    alignas(16) float sums[4];
    _mm_store_ps(sums, lane_sums(v[0], v[1], v[2], v[3]));
    for (int q = 0; q < 4 && r + q < count; ++q) dw[r + q] = accumulate ? dw[r + q] + sums[q] : sums[q];
  }
}

// The tiles of rows [m0, m0 + ROWS) x every tap over one span, NT taps at a time (the last tile
// narrower).
template <class Positions, int ROWS, int NT>
void grad_rows(const GradChunk<typename Positions::Value>& chunk, const Span& span, int64_t m0, const int64_t* off,
               float* partial, int64_t K, bool first) {
  int64_t k0 = 0;
  for (; k0 + NT <= K; k0 += NT)
    grad_tile<Positions, ROWS, NT>(chunk, span, m0, off + k0, partial + k0 * 16, K, first);
  if constexpr (NT > 1) {
    if (k0 < K) {
      // One narrower tile for the K % NT taps left.
      [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
        ((K - k0 == Ns + 1
              ? grad_tile<Positions, ROWS, Ns + 1>(chunk, span, m0, off + k0, partial + k0 * 16, K, first)
              : void()),
         ...);
      }(std::make_integer_sequence<int, NT - 1>());
    }
  }
}

// Rows [m0, m0 + ROWS) of the chunk over all its spans, then their sums into dw (rows K apart).
template <class Positions, int ROWS, int NT>
void grad_block(const GradChunk<typename Positions::Value>& chunk, const std::vector<Span>& spans, int64_t m0,
                const int64_t* off, float* partial, float* dw, int64_t K, bool accumulate) {
  for (size_t s = 0; s < spans.size(); ++s)
    grad_rows<Positions, ROWS, NT>(chunk, spans[s], m0, off, partial, K, s == 0);
  add_lane_sums(partial, ROWS, K, dw, accumulate);
}

}  // namespace

bool conv2d_grid_weight_grad_suits(const Conv2dGeometry& g, DType dtype) {
  const int64_t M = g.out_channels_per_group();
  // An ungrouped layer's tasks are blocks of 8 channels or more (Note [Grid tasks]): with more
  // threads than blocks, im2col + GEMM, which splits over the images too, keeps them all busy. Up
  // to 64 channels: n8 32 -> 64 at 128 x 128 (bench kernels' row) took 15.3-15.5 ms here against
  // 19.8-20.3 by im2col + GEMM (f32; bf16 7.8-8.0 against 8.6-8.8; convprobe, medians, two
  // rounds, 2 threads), once the tiles ran over spans in L1 (Note [Weight gradient spans in L1]).
  const bool ungrouped_fits = M % 8 == 0 && (M + 7) / 8 >= int64_t(num_threads());
  const int64_t max_channels = g.groups > 1 ? 32 : 64;
  return conv2d_grid_takes(dtype) && stride_fits(g) && (M % 4 == 0 || thin_fits(g)) && M <= max_channels &&
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
    // Note [Weight gradient spans in L1]: the tiles' partial sums.
    const Tensor partials = Tensor::empty({kRows * K * 16}, {.dtype = DType::f32});
    float* partial = partials.data<float>();
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
        const std::vector<Span> spans = spans_of(images, vectors);
        const bool accumulate = n0 > 0;
        for (int64_t m0 = m_begin; m0 < m_end;) {
          float* out = dwp + (grp * M + m0) * K;
          const int64_t left = m_end - m0, at = m0 - m_begin;
          if (left >= 8) {  // Note [Weight gradient on a padded grid]: 8 x 3 where it can
            grad_block<Positions, 8, 3>(chunk, spans, at, grid.off.data(), partial, out, K, accumulate);
            m0 += 8;
          } else if (left >= 4) {
            grad_block<Positions, 4, 6>(chunk, spans, at, grid.off.data(), partial, out, K, accumulate);
            m0 += 4;
          } else if (left == 2) {  // Note [Thin groups on the grid]
            grad_block<Positions, 2, 6>(chunk, spans, at, grid.off.data(), partial, out, K, accumulate);
            m0 += 2;
          } else {
            grad_block<Positions, 1, 9>(chunk, spans, at, grid.off.data(), partial, out, K, accumulate);
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
    } else {  // summed in f32, rounded once (Note [bf16 on the grid], Note [f16 on the grid])
      const Tensor sums = Tensor::empty(dw.shape(), {.dtype = DType::f32});
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      if constexpr (std::is_same_v<T, BFloat16>) {
        if (conv2d_grid_bf16_pairs()) {
          grid_weight_grad<Bf16PositionPairs>(
              g, grid, dy.data<T>(), sums.data<float>(),
              [&](int64_t n, int64_t grp, BFloat16* xpad) { pad_planes(g, grid, x_group(n, grp), xpad); });
          return copy(sums, dw);
        }
      }
#endif
      widened(sums.data<float>());
      copy(sums, dw);
    }
  });
}
#else
bool conv2d_grid_weight_grad_suits(const Conv2dGeometry&, DType) { return false; }
void conv2d_grid_weight_grad(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
#endif

}  // namespace ember::cpu
