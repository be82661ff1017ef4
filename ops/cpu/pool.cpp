// 2-D pooling on the CPU. Every kernel works on whole (n, c) planes, one task per group of
// planes, so the backward passes scatter into memory that only their own task writes: no
// atomics, deterministic sums.
// Average windows follow Note [Separable windows] (ops/pool_windows.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/pool_max_2x2.h"
#include "ops/cpu/pool_max_2x2_avx512.h"
#include "ops/cpu/pool_max_3x3_backward_avx512.h"
#include "ops/cpu/pool_max_lanes_avx512.h"
#include "ops/cpu/window_sums.h"
#include "ops/kernels.h"
#include "ops/pool_windows.h"

namespace ember::cpu {
namespace {

constexpr int64_t kElementsPerTask = 1 << 15;

// Runs fn(first plane, count) for runs of planes, in parallel tasks of about kElementsPerTask
// elements.
template <class F>
void for_each_run_of_planes(int64_t planes, int64_t plane_elements, F&& fn) {
  parallel_for(0, planes, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(1, plane_elements)),
               [&](int64_t b, int64_t e) { fn(b, e - b); });
}

// Runs fn(plane) for every plane, in the same tasks.
template <class F>
void for_each_plane(int64_t planes, int64_t plane_elements, F&& fn) {
  for_each_run_of_planes(planes, plane_elements, [&](int64_t first, int64_t count) {
    for (int64_t p = first; p < first + count; ++p) fn(p);
  });
}

template <class T, class Spans>
void average_forward(const Tensor& x, const Tensor& y, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for_each_plane(x.size(0), H * W, [&](int64_t p) {
    const T* in = xp + p * H * W;
    T* out = yp + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const compute_t<T> sum = window_sum(in, W, r, c);
        const int64_t count = window_count(r, c, count_pad);
        out[oh * Wo + ow] = count > 0 ? T(sum / compute_t<T>(count)) : T(0);  // rounded once (16-bit)
      }
    }
  });
}

// partition: the windows cover every input once (adaptive windows of a plane that divides into
// them), so each input is +0 plus its window's share, stored once (16-bit: rounded once); else
// shares are added into a cleared plane (f32 and f64 only: 16-bit would round every add).
template <class T, class Spans>
void average_backward(const Tensor& dy, const Tensor& dx, Spans rows, Spans cols, bool count_pad,
                      bool partition = false) {
  using C = compute_t<T>;
  const int64_t H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  if constexpr (is_float16_v<T>)  // only adaptive_avg_pool2d_backward takes 16-bit gradients
    EMBER_CHECK(partition, "adaptive_avg_pool2d_backward: ", dtype_name(dy.dtype()),
                " gradients need windows that partition the plane (", H, "x", W, " into ", Ho, "x", Wo,
                "); widen overlapping ones to f32");
  const T* dyp = dy.data<T>();
  T* dxp = dx.data<T>();
  for_each_plane(dx.size(0), H * W, [&](int64_t p) {
    const T* g = dyp + p * Ho * Wo;
    T* out = dxp + p * H * W;
    if (!partition) std::fill(out, out + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const int64_t count = window_count(r, c, count_pad);
        if (count <= 0) continue;
        const C share = C(g[oh * Wo + ow]) / C(count);
        if (partition) {
          const T value(C(0) + share);  // +0 + share, as the adds below: a -0 share gives +0
          for (int64_t h = r.begin; h < r.end; ++h) std::fill(out + h * W + c.begin, out + h * W + c.end, value);
        } else if constexpr (!is_float16_v<T>) {  // 16-bit: partitions only (checked above)
          for (int64_t h = r.begin; h < r.end; ++h)
            for (int64_t w = c.begin; w < c.end; ++w) out[h * W + w] += share;
        }
      }
    }
  });
}

using namespace pool_detail;  // the argmax encodings and the 2x2 passes (ops/cpu/pool_max_2x2.h)

// Any other window: window_max's scan, its flat index encoded per output.
template <class T, class Argmax, class I = typename Argmax::type>
void max_plane(const Pool2dGeometry& g, const T* in, T* out, I* idx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Span r = rows(oh);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      int64_t flat;
      window_max(in, g.in_w, r, cols(ow), out[oh * g.out_w + ow], flat);
      idx[oh * g.out_w + ow] =
          Argmax::encode(flat, g.in_w, oh * g.stride_h - g.pad_h, ow * g.stride_w - g.pad_w, g.kernel_w);
    }
  }
}

template <class T, class Argmax, class I = typename Argmax::type>
void max_plane_backward(const Pool2dGeometry& g, const T* grad, const I* idx, T* out) {
  std::fill(out, out + g.in_h * g.in_w, T(0));
  if constexpr (std::is_same_v<Argmax, WindowOffset>) {
    // A window offset's cell is the window's padded origin plus a step fixed per offset: a table
    // of kernel_h x kernel_w steps instead of a division and a remainder per output (the stem's
    // 3x3 pool at batch 8, `bench ops`: 4.3-4.8 -> 1.9-2.1 ms on one thread). Gathering instead,
    // 16 cells of an input row at a time from the windows that hold them (permutes of the output
    // row, a compare with each window's offset), was 2-2.8x slower there (2026-12-07, Zen 5): at
    // stride 2 there are four inputs per output, and each took about three masked terms (permute,
    // compare, add) where this loop does one add per output. The stem's windows (3x3, stride 2,
    // padding 1) now take whole rows of terms instead (Note [Max pool 3x3 backward by rows]).
    int64_t step[kMaxPoolWindowOffsetCells];
    for (int64_t v = 0; v < g.kernel_h * g.kernel_w; ++v) step[v] = v / g.kernel_w * g.in_w + v % g.kernel_w;
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const int64_t origin = (oh * g.stride_h - g.pad_h) * g.in_w - g.pad_w, i0 = oh * g.out_w;
      for (int64_t ow = 0; ow < g.out_w; ++ow) out[origin + ow * g.stride_w + step[idx[i0 + ow]]] += grad[i0 + ow];
    }
    return;
  }
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t i = oh * g.out_w + ow;
      out[Argmax::decode(idx[i], g.in_w, oh * g.stride_h - g.pad_h, ow * g.stride_w - g.pad_w, g.kernel_w)] += grad[i];
    }
}

bool is_2x2_stride_2(const Pool2dGeometry& g) {
  return g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

template <class T, class Argmax>
void max_forward_typed(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  using I = typename Argmax::type;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  I* ip = indices.data<I>();
  const bool two_by_two = is_2x2_stride_2(g);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (!std::is_same_v<T, double> && std::is_same_v<Argmax, WindowOffset>) {
    if (two_by_two)  // Note [Max pool 2x2 in registers]
      return for_each_run_of_planes(g.planes, in_plane, [&](int64_t p, int64_t count) {
        max_planes_2x2_in_registers(xp + p * in_plane, count, g.in_h, g.in_w, yp + p * out_plane, ip + p * out_plane);
      });
  }
#endif
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    if (two_by_two)
      return max_plane_2x2<T, Argmax>(xp + p * in_plane, yp + p * out_plane, ip + p * out_plane, g.in_w, g.out_h,
                                      g.out_w);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    if constexpr (!std::is_same_v<T, double>) {
      if (lanes_suit<T>(g)) {  // Note [Max pool by lanes]
        const T* x_plane = xp + p * in_plane;
        T* y_plane = yp + p * out_plane;
        I* i_plane = ip + p * out_plane;
        if (g.stride_w == 1) return max_plane_in_lanes<T, Argmax, 1>(g, x_plane, y_plane, i_plane);
        if (g.stride_w == 2 && g.kernel_w == 3)
          return max_plane_in_lanes<T, Argmax, 2, 3>(g, x_plane, y_plane, i_plane);
        if (g.stride_w == 2) return max_plane_in_lanes<T, Argmax, 2>(g, x_plane, y_plane, i_plane);
        if constexpr (std::is_same_v<T, float>) return max_plane_in_lanes<T, Argmax, 0>(g, x_plane, y_plane, i_plane);
      }
    }
#endif
    max_plane<T, Argmax>(g, xp + p * in_plane, yp + p * out_plane, ip + p * out_plane);
  });
}

template <class T, class Argmax>
void max_backward_typed(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  using I = typename Argmax::type;
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const T* dyp = dy.data<T>();
  const I* ip = indices.data<I>();
  T* dxp = dx.data<T>();
  const bool two_by_two = is_2x2_stride_2(g);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (!std::is_same_v<T, double> && std::is_same_v<Argmax, WindowOffset>) {
    // Note [Max pool 2x2 in registers]: f32 rows of whole blocks keep the portable backward.
    const bool registers = !std::is_same_v<T, float> || g.out_w < kPoolBlock;
    if (two_by_two && registers)
      return for_each_run_of_planes(g.planes, in_plane, [&](int64_t p, int64_t count) {
        max_planes_2x2_backward_in_registers(dyp + p * out_plane, ip + p * out_plane, count, g.in_h, g.in_w,
                                             dxp + p * in_plane);
      });
    if constexpr (kRowsBackward<T>)
      if (is_3x3_stride_2_pad_1(g))  // Note [Max pool 3x3 backward by rows]
        return for_each_plane(g.planes, in_plane, [&](int64_t p) {
          max_plane_3x3_backward_in_registers(dyp + p * out_plane, ip + p * out_plane, g.in_h, g.in_w,
                                              dxp + p * in_plane);
        });
  }
#endif
  for_each_plane(g.planes, in_plane, [&](int64_t p) {
    T* out = dxp + p * in_plane;
    const T* grad = dyp + p * out_plane;
    const I* idx = ip + p * out_plane;
    if (two_by_two) max_plane_2x2_backward<T, Argmax>(grad, idx, out, g.in_h, g.in_w, g.out_h, g.out_w);
    else max_plane_backward<T, Argmax>(g, grad, idx, out);
  });
}

// Calls fn(TypeTag<Argmax>) for the encoding of `indices` (Note [Max pool window offsets]).
template <class F>
void dispatch_argmax(const Pool2dGeometry& g, const Tensor& indices, const char* op, F&& fn) {
  if (indices.dtype() == DType::i64) return fn(TypeTag<PlaneIndex>{});
  EMBER_CHECK(indices.dtype() == DType::u8 && g.kernel_h * g.kernel_w <= kMaxPoolWindowOffsetCells, op,
              ": expected i64 plane indices, or u8 window offsets for windows of at most ",
              kMaxPoolWindowOffsetCells, " cells; got ", dtype_name(indices.dtype()), " for a ", g.kernel_h, "x",
              g.kernel_w, " window");
  fn(TypeTag<WindowOffset>{});
}

// Views x (planes, H, W) whatever its rank (the op layer passes contiguous (N, C, H, W)).
Tensor planes_view(const Tensor& t) {
  const int64_t H = t.size(-2), W = t.size(-1);
  return Tensor::view_of(t, {t.numel() / std::max<int64_t>(1, H * W), H, W}, {H * W, W, 1}, t.offset());
}

}  // namespace

// Max pooling also takes bf16 and f16 (Note [Native 16-bit max pooling] in ops/pool.cpp).
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices) {
  dispatch_float_or_16_bit(x.dtype(), "max_pool2d", [&]<class T>(TypeTag<T>) {
    dispatch_argmax(g, indices, "max_pool2d",
                    [&]<class Argmax>(TypeTag<Argmax>) { max_forward_typed<T, Argmax>(g, x, y, indices); });
  });
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  dispatch_float_or_16_bit(dy.dtype(), "max_pool2d_backward", [&]<class T>(TypeTag<T>) {
    dispatch_argmax(g, indices, "max_pool2d_backward",
                    [&]<class Argmax>(TypeTag<Argmax>) { max_backward_typed<T, Argmax>(g, dy, indices, dx); });
  });
}

bool max_pool2d_backward_sums_in_f32(const Pool2dGeometry& g, DType dtype, DType indices) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // Note [Max pool 3x3 backward by rows]
  return (dtype == DType::bf16 || dtype == DType::f16) && indices == DType::u8 && is_3x3_stride_2_pad_1(g);
#else
  return false;
#endif
}

void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  dispatch_float(x.dtype(), "avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, count_include_pad);
  });
}

void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx) {
  const FixedSpans rows = row_spans(g), cols = col_spans(g);
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, count_include_pad);
  });
}

// bf16 and f16 too (Note [Native 16-bit average pooling] in ops/pool.cpp).
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const AdaptiveSpans rows{x.size(-2), y.size(-2)}, cols{x.size(-1), y.size(-1)};
  dispatch_float_or_16_bit(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, false);
  });
}

// bf16 and f16 where the windows partition the plane (Note [Native 16-bit average pooling]).
void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  const AdaptiveSpans rows{dx.size(-2), dy.size(-2)}, cols{dx.size(-1), dy.size(-1)};
  const bool partition = adaptive_windows_partition(dx.size(-2), dx.size(-1), dy.size(-2), dy.size(-1));
  dispatch_float_or_16_bit(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, false, partition);
  });
}

}  // namespace ember::cpu
