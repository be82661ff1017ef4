#include "ops/conv.h"

#include "autograd/graph.h"
#include "ops/autocast.h"
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

void check_floating_operand(const char* op, const char* name, const Tensor& t, const Tensor& like) {
  EMBER_CHECK(t.dtype() == like.dtype(), op, ": expected ", name, " of dtype ", dtype_name(like.dtype()), ", got ",
              dtype_name(t.dtype()));
  EMBER_CHECK(t.device() == like.device(), op, ": expected ", name, " on ", like.device(), ", got ", t.device());
}

// Whether `pass` of g runs in x's 16-bit dtype, or on f32 copies widened here, rounded once:
// bf16 on the CPU, bf16 and f16 on cuda (native_reduced_gemm), and f16 on the CPU where the padded
// grid runs the pass (Note [f16 on the grid] in ops/cpu/conv_grid_tiles_avx512.h).
bool native_reduced_conv(const Tensor& x, const Conv2dGeometry& g, cpu::ConvPass pass,
                         Activation act = Activation::none) {
  return native_reduced_gemm(x) || (x.dtype() == DType::f16 && cpu::conv2d_takes_f16(g, pass, act));
}

}  // namespace

Conv2dGeometry conv2d_geometry(const Shape& xs, const Shape& ws, IntPair stride, IntPair padding, IntPair dilation,
                               int64_t groups, const char* op) {
  EMBER_CHECK(xs.size() == 4, op, ": expected input of rank 4 (N, Cin, H, W), got shape ", shape_str(xs));
  EMBER_CHECK(ws.size() == 4, op, ": expected weight of rank 4 (Cout, Cin/groups, kH, kW), got shape ", shape_str(ws));
  EMBER_CHECK(stride.h >= 1 && stride.w >= 1, op, ": expected stride >= 1, got ", pair_str(stride));
  EMBER_CHECK(dilation.h >= 1 && dilation.w >= 1, op, ": expected dilation >= 1, got ", pair_str(dilation));
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0, op, ": expected padding >= 0, got ", pair_str(padding));
  EMBER_CHECK(groups >= 1, op, ": expected groups >= 1, got ", groups);
  Conv2dGeometry g;
  g.batch = xs[0], g.in_channels = xs[1], g.in_h = xs[2], g.in_w = xs[3];
  g.out_channels = ws[0], g.kernel_h = ws[2], g.kernel_w = ws[3];
  g.stride_h = stride.h, g.stride_w = stride.w, g.pad_h = padding.h, g.pad_w = padding.w;
  g.dilation_h = dilation.h, g.dilation_w = dilation.w, g.groups = groups;
  EMBER_CHECK(g.in_channels % groups == 0 && g.out_channels % groups == 0, op, ": groups (", groups,
              ") must divide both the input channels (", g.in_channels, ") and the output channels (",
              g.out_channels, ")");
  EMBER_CHECK(ws[1] * groups == g.in_channels, op, ": weight ", shape_str(ws), " expects ", ws[1] * groups,
              " input channels (", ws[1], " per group x ", groups, " groups) but the input ", shape_str(xs),
              " has ", g.in_channels);
  EMBER_CHECK(g.kernel_h >= 1 && g.kernel_w >= 1 && g.out_channels >= 1, op,
              ": expected a weight with at least one output channel and a non-empty kernel, got ", shape_str(ws));
  const int64_t span_h = dilation.h * (g.kernel_h - 1) + 1, span_w = dilation.w * (g.kernel_w - 1) + 1;
  const int64_t padded_h = g.in_h + 2 * padding.h, padded_w = g.in_w + 2 * padding.w;
  EMBER_CHECK(span_h <= padded_h && span_w <= padded_w, op, ": kernel ", shape_str({g.kernel_h, g.kernel_w}),
              " with dilation ", pair_str(dilation), " spans ", shape_str({span_h, span_w}),
              ", larger than the padded input ", shape_str({padded_h, padded_w}), " (input ", shape_str(xs),
              ", weight ", shape_str(ws), ", padding ", pair_str(padding), ")");
  g.out_h = window_output_size(g.in_h, g.kernel_h, stride.h, padding.h, dilation.h);
  g.out_w = window_output_size(g.in_w, g.kernel_w, stride.w, padding.w, dilation.w);
  return g;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntPair stride, IntPair padding, IntPair dilation,
              int64_t groups, Activation act, Conv2dWeightPack* pack) {
  EMBER_CHECK(x.defined() && w.defined(), "conv2d: expected defined input and weight");
  // The low-precision weights are a new tensor every call: nothing to keep packed.
  if (autocast_dtype() && (x.dtype() == DType::f32 || w.dtype() == DType::f32))  // Note [Autocast policy]
    return conv2d(autocast_low(x), autocast_low(w), autocast_low(b), stride, padding, dilation, groups, act);
  EMBER_CHECK(is_floating(x.dtype()), "conv2d: expected a floating input, got ", dtype_name(x.dtype()));
  check_floating_operand("conv2d", "weight", w, x);
  const Conv2dGeometry g = conv2d_geometry(x.shape(), w.shape(), stride, padding, dilation, groups);
  if (is_reduced_float(x.dtype()) && !native_reduced_conv(x, g, cpu::ConvPass::forward, act)) {
    const AutocastGuard f32_inside(DType::f32);
    return narrowed(conv2d(x.to(DType::f32), w.to(DType::f32), widened(b), stride, padding, dilation, groups, act), x.dtype());
  }
  if (b.defined()) {
    check_floating_operand("conv2d", "bias", b, x);
    EMBER_CHECK(b.dim() == 1 && b.size(0) == g.out_channels, "conv2d: expected bias of shape ",
                shape_str({g.out_channels}), ", got ", shape_str(b.shape()));
  }
  Tensor y = Tensor::empty({g.batch, g.out_channels, g.out_h, g.out_w}, x.options());
  {
    const autograd::NoGradGuard untracked;  // copies of the operands: nodes nothing would consume
    conv2d_forward_kernel(x.device(), g, x.contiguous(), w.contiguous(), b.defined() ? b.contiguous() : Tensor(),
                          act, y, pack);
  }
  if (needs_grad({x, w, b})) {
    const bool nx = needs_grad(x), nw = needs_grad(w), nb = needs_grad(b);
    const bool activated = act != Activation::none;
    record(activated ? "conv2d_act" : "conv2d", {x, w, b}, y,
           [sx = save(nw ? x : Tensor()), sw = save(nx ? w : Tensor()), sy = save(activated ? y : Tensor()), act,
            xs = x.shape(), ws = w.shape(), stride, padding, dilation, groups, nx, nw,
            nb](Tensor dy) mutable -> TensorList {
             // dy is handed over, so dz may reuse its buffer, and the saved output is taken, so
             // neither stays live through the GEMMs below (Note [Donated gradients]).
             Tensor output = act == Activation::none ? Tensor() : sy.take("conv2d");
             const auto [g, db] = bias_activation_backward(std::move(dy), output, act, 1, nb);
             output = Tensor();
             return {nx ? conv2d_input_grad(g, sw.get("conv2d"), xs, stride, padding, dilation, groups) : Tensor(),
                     nw ? conv2d_weight_grad(sx.get("conv2d"), g, ws, stride, padding, dilation, groups) : Tensor(),
                     db};
           });
  }
  return y;
}

Tensor conv2d_input_grad(const Tensor& dy, const Tensor& w, const Shape& input_shape, IntPair stride,
                         IntPair padding, IntPair dilation, int64_t groups) {
  const char* op = "conv2d_input_grad";
  EMBER_CHECK(is_floating(dy.dtype()), op, ": expected a floating gradient, got ", dtype_name(dy.dtype()));
  check_floating_operand(op, "weight", w, dy);
  const Conv2dGeometry g = conv2d_geometry(input_shape, w.shape(), stride, padding, dilation, groups, op);
  if (is_reduced_float(dy.dtype()) && !native_reduced_conv(dy, g, cpu::ConvPass::input_grad)) {  // as conv2d's
    const AutocastGuard f32_inside(DType::f32);
    return narrowed(
        conv2d_input_grad(dy.to(DType::f32), w.to(DType::f32), input_shape, stride, padding, dilation, groups),
        dy.dtype());
  }
  const Shape out_shape{g.batch, g.out_channels, g.out_h, g.out_w};
  EMBER_CHECK(dy.shape() == out_shape, op, ": expected a gradient of shape ", shape_str(out_shape), ", got ",
              shape_str(dy.shape()));
  Tensor dx = Tensor::empty(input_shape, dy.options());
  conv2d_input_grad_kernel(dy.device(), g, dy.contiguous(), w.contiguous(), dx);
  return dx;
}

Tensor conv2d_weight_grad(const Tensor& x, const Tensor& dy, const Shape& weight_shape, IntPair stride,
                          IntPair padding, IntPair dilation, int64_t groups) {
  const char* op = "conv2d_weight_grad";
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got ", dtype_name(x.dtype()));
  check_floating_operand(op, "gradient", dy, x);
  const Conv2dGeometry g = conv2d_geometry(x.shape(), weight_shape, stride, padding, dilation, groups, op);
  if (is_reduced_float(x.dtype()) && !native_reduced_conv(x, g, cpu::ConvPass::weight_grad)) {  // as conv2d's
    const AutocastGuard f32_inside(DType::f32);
    return narrowed(
        conv2d_weight_grad(x.to(DType::f32), dy.to(DType::f32), weight_shape, stride, padding, dilation, groups),
        x.dtype());
  }
  const Shape out_shape{g.batch, g.out_channels, g.out_h, g.out_w};
  EMBER_CHECK(dy.shape() == out_shape, op, ": expected a gradient of shape ", shape_str(out_shape), ", got ",
              shape_str(dy.shape()));
  Tensor dw = Tensor::empty(weight_shape, x.options());
  conv2d_weight_grad_kernel(x.device(), g, x.contiguous(), dy.contiguous(), dw);
  return dw;
}

Tensor conv2d_bias_grad(const Tensor& dy) {
  EMBER_CHECK(is_floating(dy.dtype()), "conv2d_bias_grad: expected a floating gradient, got ",
              dtype_name(dy.dtype()));
  EMBER_CHECK(dy.dim() >= 2, "conv2d_bias_grad: expected a gradient of shape (N, C, ...), got ",
              shape_str(dy.shape()));
  return bias_activation_backward(dy, Tensor(), Activation::none, 1, true).bias;
}

}  // namespace ember
