// The CPU kernels of convolution, pooling and linear layers. Each writes into a preallocated
// output; shape checks and autograd live in ops/conv.cpp, ops/pool.cpp, ops/linear.cpp. All
// tensors are contiguous and of one floating dtype (f32 or f64) unless a contract says
// otherwise; `g` below is the geometry the op layer computed (ops/conv_geometry.h).
#pragma once

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv_geometry.h"

namespace ember::cpu {

// ---- convolution (conv.cpp) -----------------------------------------------------------------
// x (N, Cin, H, W), w (Cout, Cin/groups, kH, kW), b (Cout) or undefined -> y (N, Cout, Ho, Wo)
// = act(conv + b), activated block by block as the GEMM finishes it.
void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                    const Tensor& y);
// dy (N, Cout, Ho, Wo), w (Cout, Cin/groups, kH, kW) -> dx (N, Cin, H, W).
void conv2d_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);
// x (N, Cin, H, W), dy (N, Cout, Ho, Wo) -> dw (Cout, Cin/groups, kH, kW).
void conv2d_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw);

// ---- bias + activation backward (bias_activation.cpp) ----------------------------------------
// dy, y (outer, C, inner) -> dz (outer, C, inner) = act'(y) * dy and db (C) = dz summed over
// outer and inner, in one pass. y and dz are undefined when act is none (dz would be dy); db is
// undefined when no bias gradient is wanted. dz may be dy itself (each element is read before it
// is written). The sums accumulate in double per channel.
void bias_activation_backward(Activation act, const Tensor& dy, const Tensor& y, const Tensor& dz,
                              const Tensor& db);

// ---- pooling (pool.cpp) ---------------------------------------------------------------------
// x (planes, H, W) -> y (planes, Ho, Wo), indices (planes, Ho, Wo) i64: the flat index h * W + w
// of each maximum in its input plane (padding never wins; NaN does, as in PyTorch).
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices);
// dy, indices (planes, Ho, Wo) -> dx (planes, H, W): dx[p, indices[p, i]] += dy[p, i].
void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx);
// x (planes, H, W) -> y (planes, Ho, Wo): window means; the divisor counts padding cells when
// count_include_pad (but never cells past the padded border).
void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y);
// dy (planes, Ho, Wo) -> dx (planes, H, W).
void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx);
// x (planes, H, W) -> y (planes, Ho, Wo); output cell (i, j) averages rows
// [floor(i H / Ho), ceil((i + 1) H / Ho)) and the columns likewise (PyTorch's adaptive windows).
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y);
// dy (planes, Ho, Wo) -> dx (planes, H, W).
void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx);

// ---- linear (linear.cpp) ----------------------------------------------------------------------
// x (M, K), w (N, K), b (N) or undefined -> y (M, N) = act(x w^T + b) (the bias is the GEMM's
// initial C and the activation its epilogue, so neither costs a pass of its own).
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y);

}  // namespace ember::cpu
