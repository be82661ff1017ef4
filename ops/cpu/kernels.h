// The CPU kernels. Each writes into a preallocated `out`; shape checks and autograd live in
// ops/. Contracts use the op-layer names: x, a, b inputs; out output.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/elementwise_functors.h"
#include "ops/optim_rules.h"

namespace ember::cpu {

// ---- elementwise (elementwise.cpp) --------------------------------------------------------
// x: any shape, broadcast to out's shape; out: same dtype as x.
void unary(UnaryOp op, const Tensor& x, const Tensor& out);
// a, b: broadcast to out's shape; all three the same dtype.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// a, b: same dtype, broadcast to out; out: bool.
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// cond: bool; a, b, out: one dtype; all broadcast to out.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
// src broadcast to dst's shape, converted to dst's dtype.
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& out, double value);

// ---- creation and random (fill.cpp) ---------------------------------------------------------
// out (contiguous, 1-D numel n): out[i] = start + i * step.
void arange(const Tensor& out, double start, double step);
// out contiguous f32/f64: uniform [low, high) / normal (mean, std) from Philox blocks starting
// at `first_block` of `gen`.
void uniform(const Tensor& out, const Generator& gen, uint64_t first_block, double low, double high);
void normal(const Tensor& out, const Generator& gen, uint64_t first_block, double mean, double std);
// out contiguous i64/i32: integers in [low, high).
void randint(const Tensor& out, const Generator& gen, uint64_t first_block, int64_t low, int64_t high);

// ---- reductions (reduce.cpp) --------------------------------------------------------------
enum class ReduceOp : uint8_t { sum, max, min, prod };
// x: (outer, R, inner) any strides -> out: (outer, inner) contiguous, same dtype.
void reduce(ReduceOp op, const Tensor& x, const Tensor& out);
// x: (outer, R, inner) -> values (outer, inner) same dtype, indices (outer, inner) i64.
// First index wins ties; NaN counts as the largest (and smallest) value.
void arg_reduce(bool is_max, const Tensor& x, const Tensor& values, const Tensor& indices);

// ---- linear algebra (gemm.cpp) ------------------------------------------------------------
// a: (B, M, K), b: (B, K, N) any strides (stride 0 batches allowed) -> out: (B, M, N) contiguous.
void bmm(const Tensor& a, const Tensor& b, const Tensor& out);

// ---- indexing (index.cpp) -----------------------------------------------------------------
// x: (outer, n, inner), index: (k) i64 -> out: (outer, k, inner) contiguous.
void index_select(const Tensor& x, const Tensor& index, const Tensor& out);
// out: (outer, n, inner) contiguous, index: (k), src: (outer, k, inner): out[:, index[j], :] += src[:, j, :].
void index_add(const Tensor& out, const Tensor& index, const Tensor& src);
// Along `dim`: out[..., i, ...] = x[..., index[..., i, ...], ...]; index i64 of out's shape.
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
// out[..., index[..., i, ...], ...] += src[..., i, ...] along dim; index and src of one shape.
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// ---- optimizer steps (optim.cpp) -----------------------------------------------------------
// param, grad and the state buffers: contiguous, one shape and dtype (f32/f64); undefined
// buffers are absent (no momentum, no amsgrad). Updates param and the buffers in place.
void sgd_step(const SgdStep& step, const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer);
void adam_step(const AdamStep& step, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq);

}  // namespace ember::cpu
