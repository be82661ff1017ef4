#include "ops/linalg.h"

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

// Row- or column-major within each matrix, as the bmm kernels require (see ops/cpu/gemm.cpp).
bool gemm_ready(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2);
  return (t.stride(2) == 1 && t.stride(1) >= std::max<int64_t>(cols, 1)) ||
         (t.stride(1) == 1 && t.stride(2) >= std::max<int64_t>(rows, 1));
}

// a: (B, M, K), b: (B, K, N) -> (B, M, N), recorded with its own backward.
Tensor bmm(const Tensor& a, const Tensor& b) {
  Tensor ar = gemm_ready(a) ? a : a.contiguous();
  Tensor br = gemm_ready(b) ? b : b.contiguous();
  Tensor out = Tensor::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  bmm_kernel(a.device(), ar, br, out);
  if (needs_grad({a, b})) {
    const bool na = needs_grad(a), nb = needs_grad(b);
    record("matmul", {a, b}, out, [sa = save(nb ? a : Tensor()), sb = save(na ? b : Tensor()), na,
                                   nb](const Tensor& g) -> TensorList {
      return {na ? bmm(g, sb.get("matmul").transpose(1, 2)) : Tensor(),
              nb ? bmm(sa.get("matmul").transpose(1, 2), g) : Tensor()};
    });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast_dtype() && (a.dtype() == DType::f32 || b.dtype() == DType::f32))  // Note [Autocast policy]
    return matmul(autocast_low(a), autocast_low(b));
  check_same_device("matmul", a, b);
  check_same_dtype("matmul", a, b);
  EMBER_CHECK(is_floating(a.dtype()), "matmul: expected floating tensors, got ", dtype_name(a.dtype()));
  if (is_reduced_float(a.dtype()) && !native_reduced_gemm(a)) {  // f32 GEMM on the widened operands, rounded once
    const AutocastGuard f32_inside(DType::f32);
    return narrowed(matmul(a.to(DType::f32), b.to(DType::f32)), a.dtype());
  }
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least one dim, got shapes ",
              shape_str(a.shape()), " and ", shape_str(b.shape()));
  if (is_reduced_float(a.dtype()) && a.dim() >= 3 && b.dim() == 2 && a.size(-1) == b.size(0)) {
    // Note [Folded reduced-precision matmul]: (..., M, K) @ (K, N) as one (... * M, K) @ (K, N)
    // GEMM, as PyTorch folds it, so b's gradient is one GEMM over every row, rounded once, not
    // a 16-bit GEMM per batch item summed after rounding. (The CPU widens above instead.)
    Shape out_shape = a.shape();
    out_shape.back() = b.size(1);
    return matmul(a.reshape({-1, a.size(-1)}), b).reshape(out_shape);
  }
  if (is_reduced_float(a.dtype()) && a.dim() == 2 && b.dim() >= 3 && a.size(1) == b.size(-2))  // the same, transposed
    return matmul(b.transpose(-1, -2), a.t()).transpose(-1, -2);
  // Promote 1-D operands to matrices; remember which dims to drop from the result.
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  Tensor a2 = a_vec ? a.unsqueeze(0) : a;
  Tensor b2 = b_vec ? b.unsqueeze(1) : b;
  const int64_t M = a2.size(-2), K = a2.size(-1), K2 = b2.size(-2), N = b2.size(-1);
  EMBER_CHECK(K == K2, "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " cannot be multiplied (", K, " != ", K2, ")");
  const Shape batch_a(a2.shape().begin(), a2.shape().end() - 2), batch_b(b2.shape().begin(), b2.shape().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul (batch dims)");
  const int64_t B = numel_of(batch);
  auto as_batched = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    Tensor e = t.expand(full);
    // Merge the batch dims into one: possible as a view unless the expanded strides are mixed.
    return e.dim() == 3 ? e : (batch.empty() ? e.unsqueeze(0) : e.reshape({B, rows, cols}));
  };
  Tensor out = bmm(as_batched(a2, M, K), as_batched(b2, K, N));
  Shape out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  return out.reshape(out_shape);
}

}  // namespace ember
