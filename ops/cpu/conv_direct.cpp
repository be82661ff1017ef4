// Direct grouped convolution (ops/cpu/conv_direct.h). Every pass is a sum over kernel taps
// (kh, kw) of row operations: for a tap, output row oh of a channel meets input row
// ih = oh * stride - pad + kh * dilation, and output column ow meets input column
// ow * stride + kw * dilation - pad, over the range valid_outputs() gives. Each task owns whole
// planes (or whole weight rows) of what it writes, so nothing needs atomics or partial buffers,
// and the result does not depend on the thread count:
//   forward       task (n, co): y[n, co] = bias + sum over (ci, kh, kw) of w * shifted x[n, ci]
//   input grad    task (n, ci): dx[n, ci] = sum over (co, kh, kw) of w * dy[n, co] scattered into
//                 the task's own plane (the col2im of Note [col2im without atomics], without columns)
// where ci runs over co's group. (A direct weight gradient, dw[co, ci, kh, kw] as dot products of
// dy rows and shifted x rows, measured about 2x slower than im2col + GEMM at 56 x 56 and was removed.) The planes a task touches (one output, one input: 2 x 12 KiB at
// 56 x 56 f32) stay in L1 across the taps.
#include "ops/cpu/conv_direct.h"

#include "core/parallel.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 14;

// Tasks of `per_item` elements each, grouped to about kElementsPerTask.
int64_t grain_for(int64_t per_item) { return std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(per_item, 1)); }

// out[o] += a * in[o * stride] for o in r (the inner loop of the forward and the input gradient).
template <class T>
inline void axpy_strided(T a, const T* in, int64_t stride, T* out, Range r) {
  if (stride == 1)
    for (int64_t o = r.begin; o < r.end; ++o) out[o] += a * in[o];
  else
    for (int64_t o = r.begin; o < r.end; ++o) out[o] += a * in[o * stride];
}

}  // namespace

// Note [Conv algorithms] in conv.cpp says why these bounds.
bool conv2d_direct_suits(const Conv2dGeometry& g) {
  return g.groups > 1 && g.in_channels_per_group() <= 4 && g.out_channels_per_group() <= 4 && g.out_w >= 16;
}

template <class T>
void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                           const Tensor& y) {
  const int64_t cg = g.in_channels_per_group(), M = g.out_channels_per_group(), Ho = g.out_h, Wo = g.out_w;
  const int64_t L = g.out_plane(), taps = g.kernel_h * g.kernel_w;
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = data_or_null<T>(b);
  T* yp = y.data<T>();
  parallel_for(0, g.batch * g.out_channels, grain_for(L * cg * taps), [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / g.out_channels, co = item % g.out_channels, grp = co / M;
      T* out = yp + item * L;
      std::fill(out, out + L, bp ? bp[co] : T(0));
      for (int64_t ci = 0; ci < cg; ++ci) {
        const T* in = xp + (n * g.in_channels + grp * cg + ci) * g.in_plane();
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const Range rows = valid_outputs(kh * g.dilation_h - g.pad_h, g.stride_h, g.in_h, Ho);
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const T a = wp[((co * cg + ci) * g.kernel_h + kh) * g.kernel_w + kw];
            const int64_t w_off = kw * g.dilation_w - g.pad_w;
            const Range cols = valid_outputs(w_off, g.stride_w, g.in_w, Wo);
            for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
              const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
              axpy_strided(a, in + ih * g.in_w + w_off, g.stride_w, out + oh * Wo, cols);
            }
          }
        }
      }
      if (act != Activation::none)
        visit_activation(act, [&](auto fn) { for (int64_t i = 0; i < L; ++i) out[i] = fn(out[i]); });
    }
  });
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
  template void conv2d_direct_forward<T>(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, \
                                         Activation, const Tensor&);                                         \
  template void conv2d_direct_input_grad<T>(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&);
EMBER_CONV_DIRECT_INSTANTIATE(float)
EMBER_CONV_DIRECT_INSTANTIATE(double)
#undef EMBER_CONV_DIRECT_INSTANTIATE

}  // namespace ember::cpu
