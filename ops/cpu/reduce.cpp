// Reductions over the middle dim of an (outer, R, inner) view. Note [Accumulation]: floating sums
// accumulate in double, so summing a million f32 values loses nothing visible; the (outer,
// inner) layout walks R in the outer loop and the unit-stride inner dim in the inner loop,
// which vectorises the common "sum over the batch" case without a transpose.
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
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
      case ReduceOp::sum: return Acc<T>(0);
      case ReduceOp::prod: return Acc<T>(1);
      case ReduceOp::max: return L::has_infinity ? -L::infinity() : L::lowest();
      case ReduceOp::min: return L::has_infinity ? L::infinity() : L::max();
    }
    return Acc<T>(0);
  }
  Acc<T> operator()(Acc<T> acc, T v) const {
    switch (op) {
      case ReduceOp::sum: return acc + Acc<T>(v);
      case ReduceOp::prod: return acc * Acc<T>(v);
      case ReduceOp::max: return (v != v || v > acc) ? Acc<T>(v) : acc;
      case ReduceOp::min: return (v != v || v < acc) ? Acc<T>(v) : acc;
    }
    return acc;
  }
};

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
        if (s1 == 1 && kOp == ReduceOp::sum) {
          Acc<T> part[8] = {};
          int64_t r = 0;
          for (; r + 8 <= R; r += 8)
            for (int j = 0; j < 8; ++j) part[j] += Acc<T>(row[r + j]);
          for (; r < R; ++r) acc += Acc<T>(row[r]);
          for (int j = 0; j < 8; ++j) acc += part[j];
        } else {
          for (int64_t r = 0; r < R; ++r) acc = red(acc, row[r * s1]);
        }
        o[i] = T(acc);
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
      for (int64_t j = j0; j < j1; ++j) o[i * inner + j] = T(acc[size_t(j - j0)]);
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
