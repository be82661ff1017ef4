#include "ops/pool.h"

#include "autograd/graph.h"
#include "ops/reduced_precision.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace ember {

using autograd::needs_grad;
using autograd::record;
using autograd::save;
using autograd::TensorList;

namespace {

std::string pair_str(IntPair p) { return shape_str({p.h, p.w}); }

void check_pool_input(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), op, ": expected a defined input");
  EMBER_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected input of rank 3 (C, H, W) or 4 (N, C, H, W), got shape ",
              shape_str(x.shape()));
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got ", dtype_name(x.dtype()));
}

Shape with_plane(const Shape& input_shape, int64_t h, int64_t w) {
  Shape s = input_shape;
  s[s.size() - 2] = h;
  s[s.size() - 1] = w;
  return s;
}

void check_grad_shape(const Tensor& dy, const Shape& expected, const char* op) {
  EMBER_CHECK(dy.shape() == expected, op, ": expected a gradient of shape ", shape_str(expected), ", got ",
              shape_str(dy.shape()));
  EMBER_CHECK(is_floating(dy.dtype()), op, ": expected a floating gradient, got ", dtype_name(dy.dtype()));
}

}  // namespace

Pool2dGeometry pool2d_geometry(const Shape& xs, IntPair kernel, std::optional<IntPair> stride_opt, IntPair padding,
                               const char* op) {
  EMBER_CHECK(xs.size() == 3 || xs.size() == 4, op, ": expected input of rank 3 (C, H, W) or 4 (N, C, H, W), got shape ",
              shape_str(xs));
  const IntPair stride = stride_opt.value_or(kernel);
  EMBER_CHECK(kernel.h >= 1 && kernel.w >= 1, op, ": expected kernel >= 1, got ", pair_str(kernel));
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op, ": expected stride >= 1, got ", pair_str(stride));
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w, op,
              ": expected padding between 0 and half the kernel ", pair_str(kernel), ", got ", pair_str(padding));
  Pool2dGeometry g;
  g.in_h = xs[xs.size() - 2], g.in_w = xs[xs.size() - 1];
  EMBER_CHECK(g.in_h >= 1 && g.in_w >= 1, op, ": expected a non-empty (H, W) plane, got input ", shape_str(xs));
  g.planes = numel_of(xs) / std::max<int64_t>(1, g.in_h * g.in_w);
  g.kernel_h = kernel.h, g.kernel_w = kernel.w, g.stride_h = stride.h, g.stride_w = stride.w;
  g.pad_h = padding.h, g.pad_w = padding.w;
  EMBER_CHECK(g.in_h + 2 * padding.h >= kernel.h && g.in_w + 2 * padding.w >= kernel.w, op, ": kernel ",
              pair_str(kernel), " is larger than the padded input ",
              shape_str({g.in_h + 2 * padding.h, g.in_w + 2 * padding.w}), " (input ", shape_str(xs), ")");
  g.out_h = window_output_size(g.in_h, kernel.h, stride.h, padding.h, 1);
  g.out_w = window_output_size(g.in_w, kernel.w, stride.w, padding.w, 1);
  return g;
}

// ---- max -------------------------------------------------------------------------------------
// Note [Native 16-bit max pooling]: a maximum is one of its inputs, so the CPU kernels pool bf16
// and f16 directly (comparing in float) and return what widening to f32 and rounding back would,
// without the two conversion passes. Their backward is native too when the windows do not
// overlap (stride >= kernel): every input element then receives at most one gradient, exactly.
// Overlapping windows sum gradients, which must happen in f32 and round once: the CPU kernel does
// so natively for 3x3 windows at stride 2 with padding 1 (the stem's) from u8 window offsets on
// AVX-512 builds (cpu::max_pool2d_backward_sums_in_f32; Note [Max pool 3x3 backward by rows] in
// ops/cpu/pool_max_3x3_backward_avx512.h); the other overlapping cases (i64 indices, other
// windows), and every 16-bit case on cuda, take the widening fallback (Note [Reduced-precision
// fallback]).
namespace {
bool native_16bit_max_pool(const Tensor& t) { return t.device().is_cpu(); }
bool windows_overlap(const Pool2dGeometry& g) { return g.stride_h < g.kernel_h || g.stride_w < g.kernel_w; }
bool native_16bit_max_pool_backward(const Tensor& dy, const Tensor& indices, const Pool2dGeometry& g) {
  return native_16bit_max_pool(dy) &&
         (!windows_overlap(g) || cpu::max_pool2d_backward_sums_in_f32(g, dy.dtype(), indices.dtype()));
}

// dL/dx from dy and the forward's indices (i64 plane indices or u8 window offsets).
Tensor max_pool2d_backward_of(const Tensor& dy, const Tensor& indices, const Shape& input_shape,
                              const Pool2dGeometry& g) {
  if (is_reduced_float(dy.dtype()) && !native_16bit_max_pool_backward(dy, indices, g))
    return narrowed(max_pool2d_backward_of(widened(dy), indices, input_shape, g), dy.dtype());
  check_grad_shape(dy, with_plane(input_shape, g.out_h, g.out_w), "max_pool2d_backward");
  Tensor dx = Tensor::empty(input_shape, dy.options());
  max_pool2d_backward_kernel(dy.device(), g, dy.contiguous(), indices.contiguous(), dx);
  return dx;
}

// The maximum's position as max_pool2d's autograd node saves it: u8 window offsets where the CPU
// kernels take them (Note [Max pool window offsets] in ops/cpu/pool.cpp), else i64 plane indices.
DType saved_argmax_dtype(const Tensor& x, const Pool2dGeometry& g) {
  return x.device().is_cpu() && g.kernel_h * g.kernel_w <= cpu::kMaxPoolWindowOffsetCells ? DType::u8 : DType::i64;
}

// The forward of both max pooling ops; `argmax` is the dtype of the indices it returns.
ValuesIndices max_pool2d_recorded(const Tensor& x, IntPair kernel, std::optional<IntPair> stride, IntPair padding,
                                  std::optional<DType> argmax) {
  check_pool_input(x, "max_pool2d");
  if (is_reduced_float(x.dtype()) && !native_16bit_max_pool(x)) {
    ValuesIndices r = max_pool2d_recorded(widened(x), kernel, stride, padding, argmax);
    return {narrowed(r.values, x.dtype()), r.indices};
  }
  const Pool2dGeometry g = pool2d_geometry(x.shape(), kernel, stride, padding, "max_pool2d");
  const Shape out_shape = with_plane(x.shape(), g.out_h, g.out_w);
  Tensor y = Tensor::empty(out_shape, x.options());
  Tensor indices = Tensor::empty(out_shape, {.dtype = argmax.value_or(saved_argmax_dtype(x, g)), .device = x.device()});
  max_pool2d_forward_kernel(x.device(), g, x.contiguous(), y, indices);
  if (needs_grad(x)) {
    record("max_pool2d", {x}, y, [si = save(indices), xs = x.shape(), g](const Tensor& dy) -> TensorList {
      return {max_pool2d_backward_of(dy, si.get("max_pool2d"), xs, g)};
    });
  }
  return {y, indices};
}
}  // namespace

ValuesIndices max_pool2d_with_indices(const Tensor& x, IntPair kernel, std::optional<IntPair> stride,
                                      IntPair padding) {
  return max_pool2d_recorded(x, kernel, stride, padding, DType::i64);
}

Tensor max_pool2d(const Tensor& x, IntPair kernel, std::optional<IntPair> stride, IntPair padding) {
  return max_pool2d_recorded(x, kernel, stride, padding, std::nullopt).values;
}

Tensor max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Shape& input_shape, IntPair kernel,
                           std::optional<IntPair> stride, IntPair padding) {
  const char* op = "max_pool2d_backward";
  const Pool2dGeometry g = pool2d_geometry(input_shape, kernel, stride, padding, op);
  check_grad_shape(dy, with_plane(input_shape, g.out_h, g.out_w), op);
  EMBER_CHECK(indices.dtype() == DType::i64 && indices.shape() == dy.shape(), op,
              ": expected i64 indices of shape ", shape_str(dy.shape()), ", got ", dtype_name(indices.dtype()), " ",
              shape_str(indices.shape()));
  return max_pool2d_backward_of(dy, indices, input_shape, g);
}

ValuesIndices max_pool2d_with_positions(const Tensor& x, IntPair kernel, std::optional<IntPair> stride,
                                        IntPair padding) {
  const autograd::NoGradGuard untracked;
  return max_pool2d_recorded(x, kernel, stride, padding, std::nullopt);
}

Tensor max_pool2d_backward_from_positions(const Tensor& dy, const Tensor& positions, const Shape& input_shape,
                                          IntPair kernel, std::optional<IntPair> stride, IntPair padding) {
  const char* op = "max_pool2d_backward_from_positions";
  const Pool2dGeometry g = pool2d_geometry(input_shape, kernel, stride, padding, op);
  check_grad_shape(dy, with_plane(input_shape, g.out_h, g.out_w), op);
  const DType expected = saved_argmax_dtype(dy, g);  // as max_pool2d_with_positions returns them
  EMBER_CHECK(positions.shape() == dy.shape() && positions.dtype() == expected, op, ": expected ",
              dtype_name(expected), " positions of shape ", shape_str(dy.shape()), ", got ",
              dtype_name(positions.dtype()), " ", shape_str(positions.shape()));
  return max_pool2d_backward_of(dy, positions, input_shape, g);
}

// ---- average ---------------------------------------------------------------------------------
Tensor avg_pool2d(const Tensor& x, IntPair kernel, std::optional<IntPair> stride, IntPair padding,
                  bool count_include_pad) {
  check_pool_input(x, "avg_pool2d");
  if (is_reduced_float(x.dtype())) return narrowed(avg_pool2d(widened(x), kernel, stride, padding, count_include_pad), x.dtype());
  const Pool2dGeometry g = pool2d_geometry(x.shape(), kernel, stride, padding, "avg_pool2d");
  Tensor y = Tensor::empty(with_plane(x.shape(), g.out_h, g.out_w), x.options());
  avg_pool2d_forward_kernel(x.device(), g, count_include_pad, x.contiguous(), y);
  if (needs_grad(x)) {
    record("avg_pool2d", {x}, y,
           [xs = x.shape(), kernel, stride, padding, count_include_pad](const Tensor& dy) -> TensorList {
             return {avg_pool2d_backward(dy, xs, kernel, stride, padding, count_include_pad)};
           });
  }
  return y;
}

Tensor avg_pool2d_backward(const Tensor& dy, const Shape& input_shape, IntPair kernel, std::optional<IntPair> stride,
                           IntPair padding, bool count_include_pad) {
  const char* op = "avg_pool2d_backward";
  if (is_reduced_float(dy.dtype())) return narrowed(avg_pool2d_backward(widened(dy), input_shape, kernel, stride, padding, count_include_pad), dy.dtype());
  const Pool2dGeometry g = pool2d_geometry(input_shape, kernel, stride, padding, op);
  check_grad_shape(dy, with_plane(input_shape, g.out_h, g.out_w), op);
  Tensor dx = Tensor::empty(input_shape, dy.options());
  avg_pool2d_backward_kernel(dy.device(), g, count_include_pad, dy.contiguous(), dx);
  return dx;
}

// ---- adaptive average --------------------------------------------------------------------------
// Note [Native 16-bit average pooling]: an SE block's squeeze averages each bf16 plane under
// autocast; widening the input to f32 first made it 3.4x slower than in f32 (opsprobe, 8 x 256 x
// 56 x 56: 1.64 against 0.49 ms). The CPU forward reads bf16 and f16 itself, widening each block of
// 16 exactly and summing in f32 in the same order as the f32 kernel, and rounds each mean once: the
// bits of widening, pooling and narrowing. Its backward is native where the windows partition the
// plane (a global average's do): each input is then its window's share, rounded once; overlapping
// windows, and the other devices, still widen.
Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size) {
  check_pool_input(x, "adaptive_avg_pool2d");
  if (is_reduced_float(x.dtype()) && !x.device().is_cpu())
    return narrowed(adaptive_avg_pool2d(widened(x), output_size), x.dtype());
  EMBER_CHECK(output_size.h >= 1 && output_size.w >= 1, "adaptive_avg_pool2d: expected an output size >= 1, got ",
              pair_str(output_size));
  EMBER_CHECK(x.size(-2) >= 1 && x.size(-1) >= 1, "adaptive_avg_pool2d: expected a non-empty plane, got input ",
              shape_str(x.shape()));
  Tensor y = Tensor::empty(with_plane(x.shape(), output_size.h, output_size.w), x.options());
  adaptive_avg_pool2d_forward_kernel(x.device(), x.contiguous(), y);
  if (needs_grad(x)) {
    record("adaptive_avg_pool2d", {x}, y, [xs = x.shape()](const Tensor& dy) -> TensorList {
      return {adaptive_avg_pool2d_backward(dy, xs)};
    });
  }
  return y;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& dy, const Shape& input_shape) {
  const bool native = dy.device().is_cpu() && dy.dim() >= 2 && input_shape.size() >= 2 &&
                      cpu::adaptive_windows_partition(input_shape.end()[-2], input_shape.end()[-1], dy.size(-2),
                                                      dy.size(-1));
  if (is_reduced_float(dy.dtype()) && !native)
    return narrowed(adaptive_avg_pool2d_backward(widened(dy), input_shape), dy.dtype());
  const char* op = "adaptive_avg_pool2d_backward";
  EMBER_CHECK(input_shape.size() == 3 || input_shape.size() == 4, op,
              ": expected an input shape of rank 3 or 4, got ", shape_str(input_shape));
  EMBER_CHECK(dy.dim() == int64_t(input_shape.size()) && dy.size(-2) >= 1 && dy.size(-1) >= 1, op,
              ": expected a gradient of rank ", input_shape.size(), " with a non-empty plane, got ",
              shape_str(dy.shape()));
  check_grad_shape(dy, with_plane(input_shape, dy.size(-2), dy.size(-1)), op);
  Tensor dx = Tensor::empty(input_shape, dy.options());
  adaptive_avg_pool2d_backward_kernel(dy.device(), dy.contiguous(), dx);
  return dx;
}

}  // namespace ember
