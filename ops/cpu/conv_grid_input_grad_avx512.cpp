// The input gradient of a strided, grouped convolution on a padded grid (ops/cpu/conv_direct.h),
// f32 on AVX-512 (bf16 tensors widened into the f32 grid: Note [bf16 on the grid] in
// conv_grid_tiles_avx512.h):
//   dy (N, G*M, Ho, Wo), w (G*M, cg, kH, kW) -> dx (N, G*cg, H, W), strides (sh, sw), dilation 1,
//   dx[n, g*cg + c, ih, iw] = sum over (m, kh, kw) with oh sh + kh - pad_h = ih and
//                             ow sw + kw - pad_w = iw of w[g*M + m, c, kh, kw] dy[n, g*M + m, oh, ow]
//
// Note [Strided input gradient as phase forwards]: write ih + pad_h = sh u + a (a < sh) and
// iw + pad_w = sw v + b. Only the taps kh = a + sh t reach row ih, from output row oh = u - t, so
// the pixels of one phase (a, b) are a stride-1 convolution of dy with the sub-kernel
// w[.., a + sh t, b + sw t']:
//   dx_ab[c, u, v] = sum over (m, t, t') of w[m, c, a + sh t, b + sw t'] dy[m, u - t, v - t'].
// dy is laid out once per (image, group) on a zero-padded grid, Ph = (kH - 1) / sh rows and
// Pw = (kW - 1) / sw columns before it, so that tap (m, t, t') of grid position j = u wp + v reads
// dypad + m plane + (Ph - t) wp + (Pw - t') + j; each phase is then the grid forward's product
// (ops/cpu/conv_grid_tiles_avx512.h) with its own taps and weights, and the phases' outputs are
// interleaved into dx's rows. Each pixel sums its taps in (m, t, t') order from zero, whatever the
// thread count. It replaces GEMM + col2im, whose products for a group of 2 or 4 channels have an
// inner dimension of 2 or 4, and whose col2im moved 9 values per pixel.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/conv_direct.h"

#if defined(__AVX512F__)
#include "ops/cpu/conv_grid_tiles_avx512.h"
#endif

namespace ember::cpu {

#if defined(__AVX512F__)
namespace {

// The grid of one (image, group) and the taps of each phase.
struct PhaseGrid {
  int64_t hp, wp, plane, U, V, vectors, floats, pad_rows, pad_columns;
  int64_t phases;                         // sh * sw, phase (a, b) at a * sw + b
  std::vector<std::vector<int64_t>> off;  // per phase, its taps' offsets in (m, t, t') order
};

// The taps of a kernel of `size` along an axis at `stride` in phase p: kh = p + stride t.
int64_t taps_in_phase(int64_t size, int64_t stride, int64_t p) { return p < size ? (size - 1 - p) / stride + 1 : 0; }

PhaseGrid phase_grid(const Conv2dGeometry& g) {
  PhaseGrid grid;
  const int64_t sh = g.stride_h, sw = g.stride_w, M = g.out_channels_per_group();
  grid.pad_rows = (g.kernel_h - 1) / sh, grid.pad_columns = (g.kernel_w - 1) / sw;
  grid.U = (g.in_h - 1 + g.pad_h) / sh + 1, grid.V = (g.in_w - 1 + g.pad_w) / sw + 1;
  grid.hp = std::max(grid.U, g.out_h) + grid.pad_rows;
  grid.wp = std::max(grid.V, g.out_w) + grid.pad_columns;
  grid.plane = grid.hp * grid.wp;
  grid.vectors = (grid.U * grid.wp + 15) / 16;
  grid.phases = sh * sw;
  grid.off.resize(size_t(grid.phases));
  for (int64_t a = 0; a < sh; ++a)
    for (int64_t b = 0; b < sw; ++b) {
      std::vector<int64_t>& off = grid.off[size_t(a * sw + b)];
      for (int64_t m = 0; m < M; ++m)
        for (int64_t t = 0; t < taps_in_phase(g.kernel_h, sh, a); ++t)
          for (int64_t u = 0; u < taps_in_phase(g.kernel_w, sw, b); ++u)
            off.push_back(m * grid.plane + (grid.pad_rows - t) * grid.wp + (grid.pad_columns - u));
    }
  const int64_t last_tap = (M - 1) * grid.plane + grid.pad_rows * grid.wp + grid.pad_columns;
  grid.floats = std::max(M * grid.plane, last_tap + 16 * grid.vectors);
  return grid;
}

// Per phase, every group's sub-kernels as the rows of the phase's product: (G * cg, K_ab), row
// g cg + c, column (m, t, t') = w[g M + m, c, a + sh t, b + sw t'], the phases one after another
// (together w's size) in a tensor from the caching allocator; `starts` gets each phase's first.
template <class Tw>
Tensor phase_weights(const Conv2dGeometry& g, const PhaseGrid& grid, const Tw* w, std::vector<int64_t>& starts) {
  const int64_t sh = g.stride_h, sw = g.stride_w, M = g.out_channels_per_group(), cg = g.in_channels_per_group();
  Tensor result = Tensor::empty({g.out_channels * cg * g.kernel_h * g.kernel_w}, {.dtype = DType::f32});
  float* out = result.data<float>();
  int64_t at = 0;
  for (int64_t a = 0; a < sh; ++a)
    for (int64_t b = 0; b < sw; ++b) {
      starts.push_back(at);
      for (int64_t grp = 0; grp < g.groups; ++grp)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t kh = a; kh < g.kernel_h; kh += sh)
              for (int64_t kw = b; kw < g.kernel_w; kw += sw)
                out[at++] = float(w[(((grp * M + m) * cg + c) * g.kernel_h + kh) * g.kernel_w + kw]);
    }
  return result;
}

// row[2 v + b] = phase b's value v for v < count (b = 0, 1): two phases of a row interleaved.
// Reads 16-vector blocks of both, so count rounded up to 16 must be readable.
void interleave_two(const float* even, const float* odd, float* row, int64_t count) {
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (int64_t v = 0; v < count; v += 16) {
    const __m512 e = _mm512_loadu_ps(even + v), o = _mm512_loadu_ps(odd + v);
    _mm512_storeu_ps(row + 2 * v, _mm512_permutex2var_ps(e, low, o));
    _mm512_storeu_ps(row + 2 * v + 16, _mm512_permutex2var_ps(e, high, o));
  }
}

}  // namespace

bool conv2d_grid_input_grad_suits(const Conv2dGeometry& g, DType dtype) {
  const int64_t cg = g.in_channels_per_group();
  return conv2d_grid_takes(dtype) && g.groups > 1 && (g.stride_h > 1 || g.stride_w > 1) && g.dilation_h == 1 &&
         g.dilation_w == 1 && (cg == 1 || cg == 2 || cg == 4 || cg % 8 == 0) && cg <= 32 &&
         g.out_channels_per_group() <= 32;
}

namespace {

template <class T>
void grid_input_grad(const Conv2dGeometry& g, const PhaseGrid& grid, const T* dyp, const float* phase_w,
                     const std::vector<int64_t>& starts, T* dxp) {
  const int64_t sh = g.stride_h, sw = g.stride_w, M = g.out_channels_per_group(), cg = g.in_channels_per_group();
  const int64_t ld = 16 * grid.vectors, dy_floats = (grid.floats + 15) / 16 * 16;
  const int64_t row_floats = std::max(2 * ((grid.V + 15) / 16 * 16), sw * grid.V);  // one interleaved row
  // The padded dy, every phase's cg rows of ld outputs (and 16 floats that interleave_two may read
  // past the last), one interleaved row.
  const int64_t workspace = dy_floats + grid.phases * cg * ld + 16 + row_floats;
  const int64_t tile = std::min<int64_t>(cg, 8);  // Note [Thin groups on the grid]
  const gemm_detail::VectorEpilogue epilogue({.alpha = 1.0f, .beta = 0.0f, .act = Activation::none});
  parallel_for(0, g.batch * g.groups, 1, [&](int64_t t0, int64_t t1) {
    const Tensor buffer = Tensor::empty({workspace}, {.dtype = DType::f32});
    float* dypad = buffer.data<float>();
    float* outputs = dypad + dy_floats;
    float* row = outputs + grid.phases * cg * ld + 16;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t n = task / g.groups, grp = task % g.groups;
      std::fill(dypad, dypad + grid.floats, 0.0f);
      const T* dy_group = dyp + (n * g.out_channels + grp * M) * g.out_plane();
      for (int64_t m = 0; m < M; ++m)
        grid_detail::copy_rows(dy_group + m * g.out_plane(), g.out_w,
                               dypad + m * grid.plane + grid.pad_rows * grid.wp + grid.pad_columns, grid.wp,
                               g.out_h, g.out_w);
      for (int64_t phase = 0; phase < grid.phases; ++phase) {
        const std::vector<int64_t>& off = grid.off[size_t(phase)];
        const int64_t K = int64_t(off.size());
        const float* w_group = phase_w + starts[size_t(phase)] + grp * cg * K;
        for (int64_t c0 = 0; c0 < cg; c0 += tile)
          grid_detail::grid_block(tile, grid.vectors, K, off.data(), w_group + c0 * K, dypad,
                                  grid_detail::GridRowsOutput{outputs + (phase * cg + c0) * ld, ld}, epilogue);
      }
      // dx's row ih is phase a = (ih + pad_h) % sh's grid row u = (ih + pad_h) / sh, its columns
      // interleaved from the sw phases b.
      T* dx_group = dxp + (n * g.in_channels + grp * cg) * g.in_plane();
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t ih = 0; ih < g.in_h; ++ih) {
          const int64_t a = (ih + g.pad_h) % sh, u = (ih + g.pad_h) / sh;
          const float* phase_rows = outputs + (a * sw * cg + c) * ld + u * grid.wp;  // phase (a, 0)
          T* to = dx_group + c * g.in_plane() + ih * g.in_w;
          if (sw == 1) {
            grid_detail::copy_rows(phase_rows + g.pad_w, 0, to, 0, 1, g.in_w);
            continue;
          }
          if (sw == 2) {
            interleave_two(phase_rows, phase_rows + cg * ld, row, grid.V);
          } else {
            for (int64_t v = 0; v < grid.V; ++v)
              for (int64_t b = 0; b < sw; ++b) row[v * sw + b] = phase_rows[b * cg * ld + v];
          }
          grid_detail::copy_rows(row + g.pad_w, 0, to, 0, 1, g.in_w);
        }
    }
  });
}

}  // namespace

void conv2d_grid_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const PhaseGrid grid = phase_grid(g);
  std::vector<int64_t> starts;  // 16-bit weights are widened here (Note [bf16 on the grid])
  const Tensor weights = w.dtype() == DType::bf16  ? phase_weights(g, grid, w.data<BFloat16>(), starts)
                         : w.dtype() == DType::f16 ? phase_weights(g, grid, w.data<Half>(), starts)
                                                   : phase_weights(g, grid, w.data<float>(), starts);
  grid_detail::dispatch_grid(dy.dtype(), [&]<class T>(TypeTag<T>) {
    grid_input_grad<T>(g, grid, dy.data<T>(), weights.data<float>(), starts, dx.data<T>());
  });
}
#else
bool conv2d_grid_input_grad_suits(const Conv2dGeometry&, DType) { return false; }
void conv2d_grid_input_grad(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&) {}
#endif

}  // namespace ember::cpu
