// The direct input gradient of a grouped convolution (ops/cpu/conv_direct.h): for kernel tap
// (kh, kw), output row oh of a channel meets input row ih = oh * stride - pad + kh * dilation and
// output column ow meets input column ow * stride + kw * dilation - pad, over the range
// valid_outputs() gives. Task (n, ci) owns the plane dx[n, ci] = sum over (co, kh, kw) of
// w * dy[n, co] scattered into it (the col2im of Note [col2im without atomics], without columns),
// co running over ci's group: no atomics, and a result independent of the thread count. The
// two planes a task touches (2 x 12 KiB at 56 x 56 f32) stay in L1 across the taps.
// (A scalar direct forward and weight gradient were measured slower than im2col + GEMM, 1.8x
// and 2x at 32 x 4, 56 x 56, and were removed; the forward came back in AVX-512 registers,
// conv_direct_avx512.cpp: Note [Conv algorithms] in conv.cpp.)
#include "ops/cpu/conv_direct.h"

#include "core/parallel.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 14;

// Tasks of `per_item` elements each, grouped to about kElementsPerTask.
int64_t grain_for(int64_t per_item) { return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(per_item, 1)); }

}  // namespace

// Note [Conv algorithms] in conv.cpp says why these bounds.
bool conv2d_direct_suits(const Conv2dGeometry& g) {
  return g.groups > 1 && g.in_channels_per_group() <= 4 && g.out_channels_per_group() <= 4 && g.out_w >= 16;
}

template <class T>
void conv2d_direct_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), Ho = g.out_h, Wo = g.out_w;
  const int64_t L = g.out_plane(), taps = g.kernel_h * g.kernel_w;
  const T* dyp = dy.data<T>();
  const T* wp = w.data<T>();
  T* dxp = dx.data<T>();
  parallel_for(0, g.batch * g.in_channels, grain_for(L * M * taps), [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / g.in_channels, c = item % g.in_channels, grp = c / cg, ci = c % cg;
      T* out = dxp + item * g.in_plane();
      std::fill(out, out + g.in_plane(), T(0));
      for (int64_t m = 0; m < M; ++m) {
        const int64_t co = grp * M + m;
        const T* grad = dyp + (n * g.out_channels + co) * L;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const Range rows = valid_outputs(kh * g.dilation_h - g.pad_h, g.stride_h, g.in_h, Ho);
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const T a = wp[((co * cg + ci) * g.kernel_h + kh) * g.kernel_w + kw];
            const int64_t w_off = kw * g.dilation_w - g.pad_w;
            const Range cols = valid_outputs(w_off, g.stride_w, g.in_w, Wo);
            for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
              T* row = out + (oh * g.stride_h - g.pad_h + kh * g.dilation_h) * g.in_w + w_off;
              const T* src = grad + oh * Wo;
              if (g.stride_w == 1)
                for (int64_t o = cols.begin; o < cols.end; ++o) row[o] += a * src[o];
              else
                for (int64_t o = cols.begin; o < cols.end; ++o) row[o * g.stride_w] += a * src[o];
            }
          }
        }
      }
    }
  });
}

#define EMBER_CONV_DIRECT_INSTANTIATE(T)                                                                      \
  template void conv2d_direct_input_grad<T>(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&);
EMBER_CONV_DIRECT_INSTANTIATE(float)
EMBER_CONV_DIRECT_INSTANTIATE(double)
#undef EMBER_CONV_DIRECT_INSTANTIATE

}  // namespace ember::cpu
