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
        const T sum = window_sum(in, W, r, c);
        const int64_t count = window_count(r, c, count_pad);
        out[oh * Wo + ow] = count > 0 ? sum / T(count) : T(0);
      }
    }
  });
}

template <class T, class Spans>
void average_backward(const Tensor& dy, const Tensor& dx, Spans rows, Spans cols, bool count_pad) {
  const int64_t H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  const T* dyp = dy.data<T>();
  T* dxp = dx.data<T>();
  for_each_plane(dx.size(0), H * W, [&](int64_t p) {
    const T* g = dyp + p * Ho * Wo;
    T* out = dxp + p * H * W;
    std::fill(out, out + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const Span r = rows(oh);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Span c = cols(ow);
        const int64_t count = window_count(r, c, count_pad);
        if (count <= 0) continue;
        const T share = g[oh * Wo + ow] / T(count);
        for (int64_t h = r.begin; h < r.end; ++h)
          for (int64_t w = c.begin; w < c.end; ++w) out[h * W + w] += share;
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

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// Note [Max pool by lanes]: windows other than 2x2 stride 2 (the ResNet stem's 3x3 stride 2,
// padding 1) took max_plane one output at a time, with integer divisions to encode each offset:
// 2.3% of an SE-ResNeXt-50 training step at batch 8 (perf) for that one layer. Here 16 outputs
// of a row go at once: each tap of the window is a vector of the 16 inputs it reads (padding and
// lanes past the row's end masked off, read as -inf: they never win), folded by window_max's
// rule in its order (row by row, replaced on > or NaN), and the winner's code, window offset or
// plane index, is kept in an int lane. So the maxima and their positions are window_max's, and
// the lanes start from its initial position, the first cell inside the window. A tap's inputs
// are one masked load at stride 1, two loads and a permute that keeps the even elements at
// stride 2, and a gather at other strides; the loads' masks are set up once per block of columns
// (the block then walks down the plane, which stays in L2), and a stride-2 tap whose 32 elements
// are all inside the row, every block but a row's first and last, loads them without masks:
// masked loads were most of the time. Measured (2026-12-06, Zen 5, the stem's pool at batch 8, u8
// offsets, 2 threads, poolprobe, min of 30): forward 24.2 ms one output at a time, 5.8 ms with a
// gather per tap, 4.5 ms with masked loads and permutes, 2.1 ms with plain interior loads.
constexpr int64_t kMaxLaneTaps = 16;  // window widths the lanes take (masks kept per tap)

inline bool lanes_suit(const Pool2dGeometry& g) {
  return g.in_h * g.in_w < (int64_t(1) << 31) && g.kernel_w <= kMaxLaneTaps;
}

// Loads of the 16 inputs of one tap for a block of outputs, set up once per block and used for
// every row of the window: lane i reads row[first + kStride i] (kStride 0: any stride, a gather
// of `column`), -inf where `valid` is off.
template <int kStride>
struct TapLoad {
  int64_t first;
  __m512i column;
  __mmask16 valid, low, high;  // stride 2: the elements first .. first + 31 inside the row
  bool interior;
  TapLoad() = default;
  TapLoad(int64_t first_column, __m512i columns, __mmask16 live_lanes, int64_t W)
      : first(first_column), column(columns), valid(live_lanes) {
    auto inside = [&](int64_t from) -> __mmask16 {
      const int64_t begin = std::clamp<int64_t>(-from, 0, 16), end = std::clamp<int64_t>(W - from, 0, 16);
      return __mmask16(((1u << end) - 1) & ~((1u << begin) - 1));
    };
    low = inside(first);
    high = inside(first + 16);
    interior = valid == 0xFFFF && low == 0xFFFF && high == 0xFFFF;
  }
  // The address of row[offset], which a masked load may take outside the row (its lanes there
  // off): computed as an integer, since a pointer outside its array is undefined behaviour.
  static const float* address(const float* row, int64_t offset) {
    return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + offset * int64_t(sizeof(float)));
  }
  __m512 operator()(const float* row) const {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    if constexpr (kStride == 1) {
      return _mm512_mask_loadu_ps(neg_inf, valid, address(row, first));
    } else if constexpr (kStride == 2) {  // lane i keeps element 2 i
      const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      if (interior)  // all 32 elements inside the row, every lane live
        return _mm512_permutex2var_ps(_mm512_loadu_ps(row + first), evens, _mm512_loadu_ps(row + first + 16));
      const __m512 a = _mm512_mask_loadu_ps(neg_inf, low, address(row, first));
      const __m512 b = _mm512_mask_loadu_ps(neg_inf, high, address(row, first + 16));
      return _mm512_mask_mov_ps(neg_inf, valid, _mm512_permutex2var_ps(a, evens, b));
    } else {
      return _mm512_mask_i32gather_ps(neg_inf, valid, column, row, 4);
    }
  }
};

template <class Argmax, int kStride>
void max_plane_in_lanes(const Pool2dGeometry& g, const float* in, float* out, typename Argmax::type* idx) {
  constexpr bool kOffsets = std::is_same_v<Argmax, WindowOffset>;
  const FixedSpans rows = row_spans(g);
  const int64_t W = g.in_w, Wo = g.out_w, kw = g.kernel_w;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i zero = _mm512_setzero_si512(), width = _mm512_set1_epi32(int32_t(W));
  TapLoad<kStride> taps[kMaxLaneTaps];
  for (int64_t ow0 = 0; ow0 < Wo; ow0 += 16) {
    const __mmask16 live = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(int32_t(std::min<int64_t>(16, Wo - ow0))));
    // Each lane's window starts at padded column w0 = ow * stride - pad.
    const int64_t first = ow0 * g.stride_w - g.pad_w;
    const __m512i w0 = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(int32_t(g.stride_w))),
                                        _mm512_set1_epi32(int32_t(first)));
    for (int64_t k = 0; k < kw; ++k) {
      const __m512i column = _mm512_add_epi32(w0, _mm512_set1_epi32(int32_t(k)));
      const __mmask16 valid = live & _mm512_cmpge_epi32_mask(column, zero) & _mm512_cmplt_epi32_mask(column, width);
      taps[k] = TapLoad<kStride>(first + k, column, valid, W);
    }
    const __m512i first_column = _mm512_maskz_max_epi32(0xFFFF, w0, zero);
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      const Span r = rows(oh);
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      __m512i arg = kOffsets ? _mm512_add_epi32(_mm512_set1_epi32(int32_t((r.begin - h0) * kw)),
                                                _mm512_sub_epi32(first_column, w0))
                             : _mm512_add_epi32(_mm512_set1_epi32(int32_t(r.begin * W)), first_column);
      __m512 best = _mm512_set1_ps(-INFINITY);
      for (int64_t h = r.begin; h < r.end; ++h) {
        const float* row = in + h * W;
        for (int64_t k = 0; k < kw; ++k) {
          const __m512 v = taps[k](row);
          const __mmask16 wins =
              taps[k].valid & (_mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
          best = _mm512_mask_mov_ps(best, wins, v);
          const __m512i code = kOffsets ? _mm512_set1_epi32(int32_t((h - h0) * kw + k))
                                        : _mm512_add_epi32(_mm512_set1_epi32(int32_t(h * W)), taps[k].column);
          arg = _mm512_mask_mov_epi32(arg, wins, code);
        }
      }
      _mm512_mask_storeu_ps(out + oh * Wo + ow0, live, best);
      auto* at = idx + oh * Wo + ow0;
      if constexpr (kOffsets) {
        _mm512_mask_cvtepi32_storeu_epi8(at, live, arg);
      } else {
        // The zero-masking forms: GCC 12's plain ones take an "undefined" source that
        // -Wmaybe-uninitialized flags (as in widen_offsets).
        const __m256i low = _mm512_maskz_extracti64x4_epi64(0xF, arg, 0);
        const __m256i high = _mm512_maskz_extracti64x4_epi64(0xF, arg, 1);
        _mm512_mask_storeu_epi64(at, __mmask8(live), _mm512_maskz_cvtepi32_epi64(0xFF, low));
        _mm512_mask_storeu_epi64(at + 8, __mmask8(live >> 8), _mm512_maskz_cvtepi32_epi64(0xFF, high));
      }
    }
  }
}
#endif

template <class T, class Argmax, class I = typename Argmax::type>
void max_plane_backward(const Pool2dGeometry& g, const T* grad, const I* idx, T* out) {
  std::fill(out, out + g.in_h * g.in_w, T(0));
  if constexpr (std::is_same_v<Argmax, WindowOffset>) {
    // A window offset's cell is the window's padded origin plus a step fixed per offset: a table
    // of kernel_h x kernel_w steps instead of a division and a remainder per output (the stem's
    // 3x3 pool at batch 8, `bench ops`: 4.3-4.8 -> 1.9-2.1 ms on one thread).
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
    if constexpr (std::is_same_v<T, float>) {
      if (lanes_suit(g)) {
        const float* x_plane = xp + p * in_plane;
        if (g.stride_w == 1) return max_plane_in_lanes<Argmax, 1>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
        if (g.stride_w == 2) return max_plane_in_lanes<Argmax, 2>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
        return max_plane_in_lanes<Argmax, 0>(g, x_plane, yp + p * out_plane, ip + p * out_plane);
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

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const AdaptiveSpans rows{x.size(-2), y.size(-2)}, cols{x.size(-1), y.size(-1)};
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<class T>(TypeTag<T>) {
    average_forward<T>(planes_view(x), planes_view(y), rows, cols, false);
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  const AdaptiveSpans rows{dx.size(-2), dy.size(-2)}, cols{dx.size(-1), dy.size(-1)};
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>(TypeTag<T>) {
    average_backward<T>(planes_view(dy), planes_view(dx), rows, cols, false);
  });
}

}  // namespace ember::cpu
