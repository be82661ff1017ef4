// The direct forward of a convolution on a padded grid (ops/cpu/conv_direct.h), f32 on AVX-512
// (bf16 tensors widened into the f32 grid, Note [bf16 on the grid] in conv_grid_tiles_avx512.h,
// or multiplied in pairs, Note [bf16 pairs on the grid] below):
//   x (N, G*cg, H, W), w (G*M, cg, kH, kW), bias (G*M) or none -> y (N, G*M, Ho, Wo),
//   M % 8 == 0, or a thin group's M of 1, 2 (or 4 at a stride; Note [Thin groups on the grid]),
//   y[n, g*M + m, oh, ow] = act(bias + sum over (c, kh, kw) of w[g*M + m, c, kh, kw] *
//                               x[n, g*cg + c, oh sh - pad_h + kh*dil_h, ow sw - pad_w + kw*dil_w])
// (its weight gradient: conv_grid_weight_grad_avx512.cpp; the layout both share:
// conv_grid_layout_avx512.h)
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
// one FMA; here 14 x 14 uses 196 of 224 grid lanes, 7 x 7 49 of 64. Outputs go through the GEMM's
// epilogue (bias, ReLU) straight into y (Note [Tile outputs into the planes] in
// conv_grid_tiles_avx512.h). Each output sums its taps in (c, kh, kw) order from zero, as the row
// kernel and the transposed problem of the input gradient do, whatever the thread count.
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
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/conv_choice.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/gemm_microkernel.h"
#include "ops/kernels.h"

#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_layout_avx512.h"
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
namespace {

using namespace grid_detail;  // the layout and tiles of the grid (conv_grid_layout_avx512.h)

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

}  // namespace

bool conv2d_grid_forward_suits(const Conv2dGeometry& g) {
  return stride_fits(g) && (g.out_channels_per_group() % kRows == 0 || thin_fits(g));
}

bool conv2d_grid_takes(DType dtype) {
  return dtype == DType::f32 || (dtype == DType::bf16 && grid_detail::kGridTakesBf16) ||
         (dtype == DType::f16 && grid_detail::kGridTakesF16);  // Note [f16 on the grid]
}

bool conv2d_grid_forward_suits(const Conv2dGeometry& g, DType dtype) {
  if (!conv2d_grid_takes(dtype)) return false;
  // Note [bf16 on the grid]: bf16 has no row kernel, so its groups of 4 at stride 1 take the
  // grid's 4-row tiles (Note [Thin groups on the grid]) rather than im2col + GEMM.
  const bool bf16_group_of_4 = dtype == DType::bf16 && g.groups > 1 && g.out_channels_per_group() == 4;
  return conv2d_grid_forward_suits(g) || (bf16_group_of_4 && stride_fits(g));
}

namespace {

// The forward's tasks (Note [Grid tasks]) on a grid of Taps::Value elements (4 bytes): lay_out(n,
// grp, xpad) lays out a task's grid; w holds each output channel's K weights in the grid's tap
// order; outputs rounded once into y, straight from the tiles (Note [Tile outputs into the planes]
// in conv_grid_tiles_avx512.h).
template <class Taps, class T, class LayOut>
void grid_forward(const Conv2dGeometry& g, const Grid& grid, const typename Taps::Weight* wp, const float* bp,
                  Activation act, T* yp, LayOut lay_out) {
  static_assert(sizeof(typename Taps::Value) == sizeof(float));
  const int64_t M = g.out_channels_per_group(), K = grid.K, plane = g.out_plane();
  const int64_t tile = std::min<int64_t>(M, kRows);  // Note [Thin groups on the grid]
  const int64_t rows = rows_per_task(g.batch * g.groups, M), splits = (M + rows - 1) / rows;  // Note [Grid tasks]
  const std::vector<VectorPlace> places = vector_places(grid.vectors, grid.wp, g.out_h, g.out_w);
  parallel_for(0, g.batch * g.groups * splits, 1, [&](int64_t t0, int64_t t1) {
    const Tensor buffer = Tensor::empty({grid.floats}, {.dtype = DType::f32});
    auto* xpad = reinterpret_cast<typename Taps::Value*>(buffer.data<float>());
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / (g.groups * splits), grp = t / splits % g.groups, m_begin = t % splits * rows;
      const int64_t m_end = std::min(M, m_begin + rows);
      lay_out(n, grp, xpad);
      T* y_group = yp + (n * g.out_channels + grp * M) * plane;
      for (int64_t m0 = m_begin; m0 < m_end; m0 += tile) {
        const gemm_detail::VectorEpilogue epilogue(
            {.alpha = 1.0f, .beta = 0.0f, .act = act, .row_bias = bp ? bp + grp * M + m0 : nullptr});
        grid_detail::grid_block<Taps>(tile, grid.vectors, K, grid.off.data(), wp + (grp * M + m0) * K, xpad,
                                      PlanesOutput<T>{y_group + m0 * plane, plane, places.data()}, epilogue);
      }
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
  const Tensor w32 = widened_to_f32(w), b32 = widened_to_f32(b);
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
#else
bool conv2d_grid_takes(DType) { return false; }
bool conv2d_grid_bf16_pairs() { return false; }
bool conv2d_grid_forward_suits(const Conv2dGeometry&, DType) { return false; }
bool conv2d_grid_forward_suits(const Conv2dGeometry&) { return false; }
void conv2d_grid_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, Activation,
                         const Tensor&) {}
#endif

}  // namespace ember::cpu
