// Reductions over the middle dim of an (outer, R, inner) view. Note [Accumulation]: floating sums
// accumulate in double, so summing a million f32 values loses nothing visible; the (outer,
// inner) layout walks R in the outer loop and the unit-stride inner dim in the inner loop,
// which vectorises the common "sum over the batch" case without a transpose.
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/kernels.h"

namespace ember::cpu {
namespace {

// bf16 / f16 accumulate like f32 (in double) and round once at the store.
template <class T> using Acc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, T>;

template <class T>
struct Reducer {
  ReduceOp op;
  Acc<T> init() const {
    using L = std::numeric_limits<compute_t<T>>;
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: return Acc<T>(0);
      case ReduceOp::prod: return Acc<T>(1);
      case ReduceOp::max: return L::has_infinity ? -L::infinity() : L::lowest();
      case ReduceOp::min: return L::has_infinity ? L::infinity() : L::max();
    }
    return Acc<T>(0);
  }
  Acc<T> operator()(Acc<T> acc, T v) const {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: return acc + Acc<T>(v);
      case ReduceOp::prod: return acc * Acc<T>(v);
      case ReduceOp::max: return (v != v || v > acc) ? Acc<T>(v) : acc;
      case ReduceOp::min: return (v != v || v < acc) ? Acc<T>(v) : acc;
    }
    return acc;
  }
  // The output of an accumulator over R values, rounded once.
  T result(Acc<T> acc, int64_t R) const {
    if constexpr (std::is_floating_point_v<Acc<T>>)
      if (op == ReduceOp::mean) return T(acc / double(R));  // R == 0: NaN
    return T(acc);
  }
};

// Note [16-bit row sums]: a row of bf16 or f16 summed as f32's, each element converted on its own
// and added to one of 8 double lanes, ran bf16 mean over (h, w) at 1.5-1.8x f32's time (opsprobe,
// 8x256x56x56: it reads half the bytes). Here 32 values at a time are widened in AVX-512 lanes
// and added to four vectors of double lanes (two chains of adds per 16 values, so the adds'
// latency is hidden). Another order than f32's 8 lanes: the same double sum wherever both are
// exact (f16 rows whose partial sums stay under 2^29 in units of 2^-24; bf16 of moderate range),
// and otherwise within double's rounding, far below the 16-bit result's. Builds without the lanes
// keep f32's loop.
template <class T>
double sum_16_bit(const T* row, int64_t R) {
  int64_t r = 0;
  double acc = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  __m512d part[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  // (The zero-masking forms: GCC 12's plain ones take an "undefined" source that
  // -Wmaybe-uninitialized flags.)
  const auto add = [&](__m512 v, int k) {
    const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
    const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
    part[k] = _mm512_add_pd(part[k], _mm512_maskz_cvtps_pd(0xFF, low));
    part[k + 1] = _mm512_add_pd(part[k + 1], _mm512_maskz_cvtps_pd(0xFF, high));
  };
  for (; r + 32 <= R; r += 32) {
    add(load_widened(row + r, 0xFFFF), 0);
    add(load_widened(row + r + 16, 0xFFFF), 2);
  }
  double lanes[8];  // _mm512_reduce_add_pd uses the plain extract
  _mm512_storeu_pd(lanes, _mm512_add_pd(_mm512_add_pd(part[0], part[2]), _mm512_add_pd(part[1], part[3])));
  for (const double lane : lanes) acc += lane;
#endif
  for (; r < R; ++r) acc += double(row[r]);
  return acc;
}

template <class T, ReduceOp kOp>
void reduce_typed(const Tensor& x, const Tensor& out) {
  const int64_t outer = x.size(0), R = x.size(1), inner = x.size(2);
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
  const T* base = x.data<T>();
  T* o = out.data<T>();
  const Reducer<T> red{kOp};
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = base + i * s0;
        Acc<T> acc = red.init();
        constexpr bool kSum = kOp == ReduceOp::sum || kOp == ReduceOp::mean;
        if constexpr (kSum && is_float16_v<T> && kFloat16Lanes) {
          if (s1 == 1) acc = sum_16_bit(row, R);  // Note [16-bit row sums]
          else
            for (int64_t r = 0; r < R; ++r) acc = red(acc, row[r * s1]);
        } else if (kSum && s1 == 1) {
          Acc<T> part[8] = {};
          int64_t r = 0;
          for (; r + 8 <= R; r += 8)
            for (int j = 0; j < 8; ++j) part[j] += Acc<T>(row[r + j]);
          for (; r < R; ++r) acc += Acc<T>(row[r]);
          for (int j = 0; j < 8; ++j) acc += part[j];
        } else {
          for (int64_t r = 0; r < R; ++r) acc = red(acc, row[r * s1]);
        }
        o[i] = red.result(acc, R);
      }
    });
    return;
  }
  parallel_for(0, outer * inner, std::max<int64_t>(1, 32768 / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
    std::vector<Acc<T>> acc;
    for (int64_t start = b; start < e;) {
      const int64_t i = start / inner, j0 = start % inner, j1 = std::min(inner, j0 + (e - start));
      acc.assign(size_t(j1 - j0), red.init());
      const T* plane = base + i * s0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = plane + r * s1;
        for (int64_t j = j0; j < j1; ++j) acc[size_t(j - j0)] = red(acc[size_t(j - j0)], row[j * s2]);
      }
      for (int64_t j = j0; j < j1; ++j) o[i * inner + j] = red.result(acc[size_t(j - j0)], R);
      start += j1 - j0;
    }
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Tensor& out) {
  dispatch_arithmetic(x.dtype(), "reduce", [&]<class T>(TypeTag<T>) {
    switch (op) {
      case ReduceOp::sum: return reduce_typed<T, ReduceOp::sum>(x, out);
      case ReduceOp::prod: return reduce_typed<T, ReduceOp::prod>(x, out);
      case ReduceOp::max: return reduce_typed<T, ReduceOp::max>(x, out);
      case ReduceOp::min: return reduce_typed<T, ReduceOp::min>(x, out);
      case ReduceOp::mean:
        if constexpr (std::is_floating_point_v<compute_t<T>>) return reduce_typed<T, ReduceOp::mean>(x, out);
        else EMBER_FAIL("mean: expected a floating tensor, got ", dtype_name(x.dtype()));
    }
  });
}

void arg_reduce(bool is_max, const Tensor& x, const Tensor& values, const Tensor& indices) {
  dispatch_arithmetic(x.dtype(), "argmax", [&]<class T>(TypeTag<T>) {
    const int64_t outer = x.size(0), R = x.size(1), inner = x.size(2);
    const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
    const T* base = x.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    parallel_for(0, outer * inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const T* p = base + (k / inner) * s0 + (k % inner) * s2;
        T best = p[0];
        int64_t at = 0;
        for (int64_t r = 1; r < R && best == best; ++r) {
          const T c = p[r * s1];
          if (c != c || (is_max ? c > best : c < best)) { best = c; at = r; }
        }
        v[k] = best;
        ix[k] = at;
      }
    });
  });
}

}  // namespace ember::cpu
