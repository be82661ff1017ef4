#include <algorithm>

#include "core/error.h"
#include "ops/kernels.h"
#include "ops/cpu/float16_blocks.h"
#include "ops/cpu/loops.h"

namespace ember::cpu {

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  const auto L = make_layout(out, {&x});
  dispatch_arithmetic(x.dtype(), "unary", [&]<class T>(TypeTag<T>) {
    visit_unary(op, [&](auto f) { cpu_elementwise<T, T>(L, in_compute_type(f)); });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_arithmetic(a.dtype(), "binary", [&]<class T>(TypeTag<T>) {
    visit_binary(op, [&](auto f) { cpu_elementwise<T, T, T>(L, in_compute_type(f)); });
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&a, &b});
  dispatch_all(a.dtype(), "compare", [&]<class T>(TypeTag<T>) {
    visit_compare(op, [&](auto f) { cpu_elementwise<bool, T, T>(L, in_compute_type(f)); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const auto L = make_layout(out, {&cond, &a, &b});
  dispatch_all(a.dtype(), "where", [&]<class T>(TypeTag<T>) {
    cpu_elementwise<T, bool, T, T>(L, [](bool c, T x, T y) { return c ? x : y; });
  });
}

namespace {

// Note [Blocked transpose copy]: dst (R, C) contiguous from a src of the same shape and dtype
// whose columns are the unit-stride direction, src(i, j) at src[i + j * ld] (x.t().contiguous(),
// or the gradient of a parameter used transposed, as ArcFace's W). The elementwise loop walks
// such a src down a column per output row, one cache line per element, and ArcFace's (1024, 128)
// copy missed L1 on nearly every one; in 32 x 32 tiles the tile's 32 source lines stay in L1.
constexpr int64_t kTransposeTile = 32;

bool is_transposed_copy(const Tensor& src, const Tensor& dst) {
  return src.dim() == 2 && dst.dim() == 2 && src.shape() == dst.shape() && src.dtype() == dst.dtype() &&
         dst.is_contiguous() && src.stride(0) == 1 && src.stride(1) >= src.size(0) && src.size(0) > 1 &&
         src.size(1) > 1 && src.numel() >= kTransposeTile * kTransposeTile;
}

template <class T>
void transposed_copy(const Tensor& src, const Tensor& dst) {
  const int64_t R = dst.size(0), C = dst.size(1), ld = src.stride(1);
  const T* in = src.data<T>();
  T* out = dst.data<T>();
  const int64_t row_tiles = (R + kTransposeTile - 1) / kTransposeTile;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (kTransposeTile * C));
  parallel_for(0, row_tiles, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t i0 = t0 * kTransposeTile; i0 < std::min(R, t1 * kTransposeTile); i0 += kTransposeTile)
      for (int64_t j0 = 0; j0 < C; j0 += kTransposeTile) {
        const int64_t i1 = std::min(R, i0 + kTransposeTile), j1 = std::min(C, j0 + kTransposeTile);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j) out[i * C + j] = in[i + j * ld];
      }
  });
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  if (is_transposed_copy(src, dst))
    return dispatch_all(dst.dtype(), "copy", [&]<class T>(TypeTag<T>) { transposed_copy<T>(src, dst); });
  const auto L = make_layout(dst, {&src});
  dispatch_all(dst.dtype(), "copy", [&]<class D>(TypeTag<D>) {
    dispatch_all(src.dtype(), "copy", [&]<class S>(TypeTag<S>) {
      if constexpr (std::is_same_v<D, S>) {  // the bits as they are (NaN payloads kept)
        cpu_elementwise<storage_t<D>, storage_t<S>>(L, [](storage_t<S> v) { return v; });
      } else {
        // In compute types, so that f16 conversions run in blocks (Note [f16 loops in blocks]):
        // the same values as static_cast<D>(S), whose 16-bit cases go through float too.
        cpu_elementwise<D, S>(L, in_compute_type([](compute_t<S> v) { return static_cast<compute_t<D>>(v); }));
      }
    });
  });
}

void fill(const Tensor& out, double value) {
  const auto L = make_layout(out, {});
  dispatch_all(out.dtype(), "fill", [&]<class T>(TypeTag<T>) {
    const T v = static_cast<T>(value);
    cpu_elementwise<T>(L, [v]() { return v; });
  });
}

}  // namespace ember::cpu
