// Which algorithm each pass of a CPU convolution runs (conv_choice.h; Note [Conv algorithms] in
// conv.cpp), and the answers conv2d_algorithm and conv2d_takes_f16 give from it.
#include "ops/cpu/conv_choice.h"

#include <cstdlib>
#include <string_view>

#include "core/tensor.h"
#include "ops/cpu/conv_direct.h"

namespace ember::cpu {
namespace {
bool conv_gemm_only() {
  static const bool gemm_only = [] {
    const char* v = std::getenv("EMBER_CONV_ALGORITHM");
    return v && std::string_view(v) == "gemm";
  }();
  return gemm_only;
}
}  // namespace

bool use_direct(const Conv2dGeometry& g, ConvPass pass) {
  return !conv_gemm_only() && pass == ConvPass::input_grad && conv2d_direct_suits(g);
}
bool use_direct_forward(const Conv2dGeometry& g, DType dtype, Activation act) {
  return !conv_gemm_only() && !g.is_pointwise() && conv2d_direct_forward_suits(g, dtype, act);
}
bool use_direct_weight_grad(const Conv2dGeometry& g, DType dtype) {
  return !conv_gemm_only() && !g.is_pointwise() && conv2d_direct_weight_grad_suits(g, dtype);
}
bool use_grid_weight_grad(const Conv2dGeometry& g, DType dtype) {
  return !conv_gemm_only() && !g.is_pointwise() && conv2d_grid_weight_grad_suits(g, dtype);
}
bool use_direct_input_grad(const Conv2dGeometry& g, DType dtype) {
  return !conv_gemm_only() && !g.is_pointwise() && conv2d_direct_input_grad_suits(g, dtype);
}
bool use_grid_input_grad(const Conv2dGeometry& g, DType dtype) {
  return !conv_gemm_only() && !g.is_pointwise() && conv2d_grid_input_grad_suits(g, dtype);
}

Tensor widened_to_f32(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::f32) return t;
  const Tensor wide = Tensor::empty(t.shape(), {.dtype = DType::f32});
  copy(t, wide);
  return wide;
}

bool conv2d_takes_f16(const Conv2dGeometry& g, ConvPass pass, Activation act) {
  // The grid only: the row kernels and im2col + GEMM are f32, f64 and bf16.
  if (pass == ConvPass::forward) return use_direct_forward(g, DType::f16, act);
  if (pass == ConvPass::input_grad) return use_direct_input_grad(g, DType::f16) || use_grid_input_grad(g, DType::f16);
  return use_grid_weight_grad(g, DType::f16);
}

const char* conv2d_algorithm(const Conv2dGeometry& g, ConvPass pass, DType dtype) {
  // Other f16 convolutions reach these kernels widened to f32 (ops/conv.cpp), so they run f32's.
  if (dtype == DType::f16 && conv2d_takes_f16(g, pass, Activation::none)) return "padded grid";
  if (dtype == DType::f16) dtype = DType::f32;
  if (g.is_pointwise()) return "1x1 gemm";
  if (pass == ConvPass::forward && use_direct_forward(g, dtype, Activation::none))
    return conv2d_grid_forward_suits(g, dtype) ? "padded grid" : "direct";
  if (pass == ConvPass::input_grad && use_direct_input_grad(g, dtype))
    return conv2d_direct_input_grad_on_grid(g, dtype) ? "padded grid" : "direct";
  if (pass == ConvPass::input_grad && use_grid_input_grad(g, dtype)) return "padded grid";
  if (pass == ConvPass::weight_grad && use_grid_weight_grad(g, dtype)) return "padded grid";
  if (pass == ConvPass::weight_grad && use_direct_weight_grad(g, dtype)) return "direct";
  if (dtype != DType::bf16 && use_direct(g, pass)) return "direct";  // Note [bf16 convolution]
  return pass == ConvPass::input_grad ? "gemm+col2im" : "im2col+gemm";
}

}  // namespace ember::cpu
