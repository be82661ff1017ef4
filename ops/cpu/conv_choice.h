// Which algorithm each pass of a CPU convolution runs (Note [Conv algorithms] in conv.cpp): the
// predicates that conv.cpp's dispatchers, conv2d_algorithm and conv2d_takes_f16 share.
//
//   if (use_direct_forward(g, x.dtype(), act)) return conv2d_direct_forward(g, x, w, b, act, y);
//
// Every one is false under EMBER_CONV_ALGORITHM=gemm (im2col + GEMM for every pass), and all but
// use_direct for pointwise layers, which are plain GEMMs.
#pragma once

#include "core/dtype.h"
#include "ops/activation_rules.h"
#include "ops/conv_geometry.h"
#include "ops/kernels.h"

namespace ember::cpu {

bool use_direct(const Conv2dGeometry& g, ConvPass pass);  // the f32 / f64 direct input gradient
bool use_direct_forward(const Conv2dGeometry& g, DType dtype, Activation act);
bool use_direct_weight_grad(const Conv2dGeometry& g, DType dtype);
bool use_grid_weight_grad(const Conv2dGeometry& g, DType dtype);
bool use_direct_input_grad(const Conv2dGeometry& g, DType dtype);
bool use_grid_input_grad(const Conv2dGeometry& g, DType dtype);
// t as f32: t itself where f32 or undefined, else a widened copy (the grid's 16-bit weights, Note
// [bf16 on the grid]; an f16 pass off the grid, Note [f16 on the grid] in conv_grid_tiles_avx512.h).
Tensor widened_to_f32(const Tensor& t);

}  // namespace ember::cpu
