// Every device kernel of the op layer: its contract, its CPU implementation (namespace cpu,
// defined in ops/cpu/<family>.cpp) and its stub, a DeviceKernel whose type is the CPU
// function's: the signature is written once, here. Ops call the stub with the device to run on:
//
//   unary_kernel(x.device(), UnaryOp::exp, x, y);   // cpu::unary, or the CUDA function bound to it
//
// The CUDA implementations live in ops/cuda/<family>.cu (same family names) and are bound with
// `ember::unary_kernel.set_cuda(...)`, which only accepts a function of the same signature
// (ops/cuda/register.h). Each kernel writes into preallocated outputs; shape checks and autograd
// live in the ops. Contracts use the op-layer names: x, a, b inputs; out output; all tensors
// contiguous and of one floating dtype (f32 or f64) unless a contract says otherwise;
// "undefined" means a default-constructed Tensor; `g` is the geometry the op computed
// (ops/conv_geometry.h).
#pragma once

#include "core/rng.h"
#include "core/tensor.h"
#include "ops/activation_rules.h"
#include "ops/conv_geometry.h"
#include "ops/dispatch.h"
#include "ops/elementwise_functors.h"
#include "ops/metric_rules.h"
#include "ops/optim_rules.h"
#include "ops/pair_tiles.h"
#include "ops/reduce_op.h"

namespace ember {
class Conv2dWeightPack;  // ops/conv_weight_pack.h
}  // namespace ember

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
// x: (outer, R, inner) any strides -> out: (outer, inner) contiguous, same dtype (mean: floating).
void reduce(ReduceOp op, const Tensor& x, const Tensor& out);
// x: (outer, R, inner) -> values (outer, inner) same dtype, indices (outer, inner) i64.
// First index wins ties; NaN counts as the largest (and smallest) value.
void arg_reduce(bool is_max, const Tensor& x, const Tensor& values, const Tensor& indices);

// ---- linear algebra (matmul.cpp) ------------------------------------------------------------
// a: (B, M, K), b: (B, K, N) any strides (stride 0 batches allowed) -> out: (B, M, N) contiguous.
void bmm(const Tensor& a, const Tensor& b, const Tensor& out);  // CPU: f32, f64, bf16

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

// ---- batch norm (norm.cpp) ------------------------------------------------------------------
// Activations (x, y, grad, dx) are f32/f64, or on the CPU also bf16/f16 (Note [16-bit batch norm]
// in ops/norm.cpp); the per-channel tensors (mean, invstd, running stats, weight, bias, dweight,
// dbias) are f32 for 16-bit activations and the activations' dtype otherwise.
// x: (N, C, S) contiguous -> mean, invstd: (C) contiguous:
//   mean[c] = mean of x[:, c, :], invstd[c] = 1 / sqrt(biased var + eps).
// running_mean, running_var: (C), or both undefined; when defined they are updated
// in place: running = (1 - momentum) * running + momentum * batch, with the unbiased variance.
void batch_norm_stats(const Tensor& x, double eps, double momentum, const Tensor& mean, const Tensor& invstd,
                      const Tensor& running_mean, const Tensor& running_var);
// x: (N, C, S) contiguous; mean, invstd: (C); weight, bias: (C) or undefined (1 and 0)
// -> y: (N, C, S) contiguous: y = act((x - mean) * invstd * weight + bias).
void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias, Activation act, const Tensor& y);
// grad, x: (N, C, S) contiguous; mean, invstd: (C) as used in the forward; weight: (C) or
// undefined. Outputs (each may be undefined to skip it), with xhat = (x - mean) * invstd:
//   dweight[c] = sum(grad * xhat), dbias[c] = sum(grad) over (N, S);
//   dx = weight * invstd * (grad - [training] (dbias + xhat * dweight) / (N * S)).
// training = false treats mean and invstd as constants (eval mode). With an activation, `grad`
// is the gradient of the activated output `y` (N, C, S), and act'(y) * grad takes its place
// above, computed on the fly in both passes (y is undefined when act is none).
void batch_norm_backward(Activation act, const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& mean,
                         const Tensor& invstd, const Tensor& weight, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias);

// ---- softmax (softmax.cpp) --------------------------------------------------------------------
// x: (outer, n, inner) contiguous f32/f64 -> y: same shape, contiguous; softmax over n, or
// log-softmax when `log`. The row max is subtracted first, so huge logits stay finite.
void softmax_forward(const Tensor& x, bool log, const Tensor& y);
// grad, y: (outer, n, inner) contiguous, y the forward output -> dx: same shape:
//   softmax:     dx = y * (grad - sum_n(grad * y))
//   log_softmax: dx = grad - exp(y) * sum_n(grad)
void softmax_backward(const Tensor& grad, const Tensor& y, bool log, const Tensor& dx);

// ---- cross-entropy and NLL (cross_entropy.cpp) -----------------------------------------------
// Note [Class targets]: target is i64 (N, S) contiguous; a row whose target is ignore_index
// gets loss 0 and gradient 0 and is not counted; any other value outside [0, C) is an Error
// naming the value and C.
//
// logits: (N, C, S) contiguous f32/f64, target: (N, S) -> losses: (N, S) and totals: (3) in
// logits' dtype, lse: (N, S) f64 (Note [f64 lse] in cross_entropy.cpp). Per row r with
// classes x_c and target t:
//   lse = log(sum_c exp(x_c)),
//   loss = lse - (1 - smoothing) * x_t - (smoothing / C) * sum_c x_c,
//   totals = [sum of the losses, number of rows whose target is not ignore_index, sum / number]
//   (the reductions, computed here so that a reduced loss costs no further kernel).
void cross_entropy_forward(const Tensor& logits, const Tensor& target, double smoothing, int64_t ignore_index,
                           const Tensor& losses, const Tensor& lse, const Tensor& totals);
// grad: (N, S) any strides (stride 0 for a broadcast scalar), logits' dtype; logits, target,
// lse (f64) as above
// -> dlogits: (N, C, S) contiguous:
//   dlogits_c = grad * (exp(x_c - lse) - (1 - smoothing) * [c == t] - smoothing / C).
void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& lse,
                            double smoothing, int64_t ignore_index, const Tensor& dlogits);
// log_probs: (N, C, S) contiguous, target: (N, S) -> losses: (N, S) = -log_probs[t], totals: (3)
// as for cross_entropy_forward.
void nll_loss_forward(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, const Tensor& losses,
                      const Tensor& totals);
// grad: (N, S) any strides -> dlog_probs: (N, C, S) contiguous, -grad at the target, 0 elsewhere.
void nll_loss_backward(const Tensor& grad, const Tensor& target, int64_t ignore_index, const Tensor& dlog_probs);

// ---- dropout (dropout.cpp) -----------------------------------------------------------------------
// x: contiguous f32/f64 -> y: contiguous, same shape. Element i is kept when
// uniform_float(word i % 4 of Philox block first_block + i / 4) >= p, and then scaled by
// 1 / (1 - p); otherwise it is 0. Requires 0 <= p < 1. Applying it to the gradient with the
// same (gen, first_block) is the backward.
void dropout(const Tensor& x, const Generator& gen, uint64_t first_block, double p, const Tensor& y);

// ---- convolution (conv.cpp) -----------------------------------------------------------------
// The CPU kernels take f32, f64 and bf16 (f32 accumulation, Note [bf16 convolution]); the
// "padded grid" algorithm below takes f32, bf16 and f16 (conv2d_grid_takes), "direct" f32/f64 and
// bf16 forwards; f16 reaches them widened to f32, except the passes on the grid
// (conv2d_takes_f16), which widen what they lay out.
// x (N, Cin, H, W), w (Cout, Cin/groups, kH, kW), b (Cout) or undefined -> y (N, Cout, Ho, Wo)
// = act(conv + b), activated block by block as the GEMM finishes it.
// `pack` (may be null): where the f32 GEMM algorithms keep w packed between calls
// (ops/conv_weight_pack.h); CUDA ignores it.
void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& b, Activation act,
                    const Tensor& y, Conv2dWeightPack* pack);
// dy (N, Cout, Ho, Wo), w (Cout, Cin/groups, kH, kW) -> dx (N, Cin, H, W).
void conv2d_input_grad(const Conv2dGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx);
// x (N, Cin, H, W), dy (N, Cout, Ho, Wo) -> dw (Cout, Cin/groups, kH, kW).
void conv2d_weight_grad(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy, const Tensor& dw);
// Which algorithm conv2d's CPU kernels run for g in `pass` on `dtype`, as a short name ("1x1
// gemm", "im2col+gemm", ...; Note [Conv algorithms] in cpu/conv.cpp), for benchmarks and tests:
// for finite operands (a non-finite x or w sends the grid's gradients to im2col + GEMM, Note
// [Non-finite values on the grid]) and the forward without an activation.
enum class ConvPass { forward, input_grad, weight_grad };
const char* conv2d_algorithm(const Conv2dGeometry& g, ConvPass pass, DType dtype = DType::f32);
// Whether the CPU kernels take f16 tensors for `pass` of g (act: the forward's): the passes that
// the padded grid runs (Note [f16 on the grid] in cpu/conv_grid_tiles_avx512.h). ops/conv.cpp
// widens the operands of the others to f32 itself, once for the forward and backward together.
bool conv2d_takes_f16(const Conv2dGeometry& g, ConvPass pass, Activation act = Activation::none);

// ---- bias + activation backward (bias_activation.cpp) ----------------------------------------
// dy, y (outer, C, inner) -> dz (outer, C, inner) = act'(y) * dy and db (C) = dz summed over
// outer and inner, in one pass. y and dz are undefined when act is none (dz would be dy); db is
// undefined when no bias gradient is wanted. dz may be dy itself (each element is read before it
// is written). The sums accumulate in double per channel.
void bias_activation_backward(Activation act, const Tensor& dy, const Tensor& y, const Tensor& dz,
                              const Tensor& db);

// ---- squeeze-and-excitation tail (scale_add_relu.cpp) -------------------------------------
// x, residual (N, C, S) contiguous, scale (N, C) contiguous, one dtype (f32/f64)
// -> y (N, C, S) = relu(x * scale[n, c] + residual).
void scale_add_relu_forward(const Tensor& x, const Tensor& scale, const Tensor& residual, const Tensor& y);
// grad, y, x (N, C, S), scale (N, C), y the forward's output; with m = (y > 0), in one pass:
//   dx = grad * m * scale, dresidual = grad * m (N, C, S); dscale[n, c] = sum over s of grad * m * x (N, C).
// Each output may be undefined to skip it; dscale is 0 where S is 0.
void scale_add_relu_backward(const Tensor& grad, const Tensor& y, const Tensor& x, const Tensor& scale,
                             const Tensor& dx, const Tensor& dscale, const Tensor& dresidual);

// ---- pooling (pool.cpp) ---------------------------------------------------------------------
// x (planes, H, W) -> y (planes, Ho, Wo), indices (planes, Ho, Wo) i64: the flat index h * W + w
// of each maximum in its input plane (padding never wins; NaN does, as in PyTorch). On the CPU,
// indices may be u8 instead for windows of at most 256 cells: the maximum's offset in its window,
// (h - h0) * kernel_w + (w - w0) (Note [Max pool window offsets] in ops/cpu/pool.cpp).
constexpr int64_t kMaxPoolWindowOffsetCells = 256;
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& y, const Tensor& indices);
// dy, indices (planes, Ho, Wo) -> dx (planes, H, W): dx[p, indices[p, i]] += dy[p, i] (indices
// in either of the forward's encodings).
void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dy, const Tensor& indices, const Tensor& dx);
// Whether max_pool2d_backward sums a `dtype` (bf16, f16) gradient's overlapping windows in f32
// and rounds each dx element once, as widening dy to f32 would; where it does not, it adds in
// `dtype` and the op widens instead (Note [Native 16-bit max pooling] in ops/pool.cpp).
bool max_pool2d_backward_sums_in_f32(const Pool2dGeometry& g, DType dtype, DType indices);
// x (planes, H, W) -> y (planes, Ho, Wo): window means; the divisor counts padding cells when
// count_include_pad (but never cells past the padded border).
void avg_pool2d_forward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& x, const Tensor& y);
// dy (planes, Ho, Wo) -> dx (planes, H, W).
void avg_pool2d_backward(const Pool2dGeometry& g, bool count_include_pad, const Tensor& dy, const Tensor& dx);
// x (planes, H, W) -> y (planes, Ho, Wo); output cell (i, j) averages rows
// [floor(i H / Ho), ceil((i + 1) H / Ho)) and the columns likewise (PyTorch's adaptive windows).
// On the CPU also bf16 and f16, summed in f32 and each mean rounded once (Note [Native 16-bit
// average pooling] in ops/pool.cpp).
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& y);
// dy (planes, Ho, Wo) -> dx (planes, H, W). On the CPU also bf16 and f16 where the windows
// partition the plane (adaptive_windows_partition: each input takes one share, rounded once); an
// Error otherwise.
void adaptive_avg_pool2d_backward(const Tensor& dy, const Tensor& dx);
// Whether the adaptive windows of an H x W plane pooled to Ho x Wo cover every input once: H and W
// multiples of Ho and Wo.
inline bool adaptive_windows_partition(int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  return Ho > 0 && Wo > 0 && H % Ho == 0 && W % Wo == 0;
}

// ---- linear (linear.cpp) ----------------------------------------------------------------------
// x (M, K), w (N, K), b (N) or undefined -> y (M, N) = act(x w^T + b) (bias and activation are
// the GEMM's epilogue, so neither costs a pass of its own). CPU: f32, f64, bf16.
void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& y);

// ---- row and column normalisation (normalize.cpp) ---------------------------------------------
// x: (R, D) any strides, f32/f64 -> y: (R, D) contiguous, y_r = x_r / max(n_r, eps); norms: (R)
// contiguous, x's dtype, n_r = ||x_r|| (before the clamp). NaN norms stay NaN in the clamp.
void normalize_rows_forward(const Tensor& x, double eps, const Tensor& y, const Tensor& norms);
// grad, y: (R, D) contiguous; norms (R), eps as the forward had them -> dx: (R, D) contiguous,
// which may be grad itself (each row is read whole before it is written):
// dx_r = grad_r / max(n_r, eps) + c_r y_r with c_r = -sum(grad_r / max(n_r, eps) * y_r) where
// n_r >= eps, else 0 (Note [Fused row normalisation] in ops/normalize.cpp).
void normalize_rows_backward(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps, const Tensor& dx);
// Column normalisation (normalize_columns: ArcFace's W (D, C), PML's layout): x (R, C)
// contiguous, f32/f64 -> y (R, C), rows y.stride(0) >= C apart, unit column stride,
// y_:c = x_:c / max(n_c, eps); norms (C) contiguous, x's dtype, n_c = ||x_:c||. Sums run down each
// column in order, in double, so y and n have the bits of normalize_rows_forward of x.t().
void normalize_columns_forward(const Tensor& x, double eps, const Tensor& y, const Tensor& norms);
// grad, y (R, C), each with unit column stride and any row stride; norms (C), eps as the forward
// had them -> dx (R, C), unit column stride, any row stride, which may be grad itself where grad's
// rows do not overlap (each element is read before it is written): normalize_rows_backward's
// formula down each column.
void normalize_columns_backward(const Tensor& grad, const Tensor& y, const Tensor& norms, double eps,
                                const Tensor& dx);

// ---- metric-learning losses (ntxent.cpp, ...) ------------------------------------------------
// e: (B, D) contiguous L2-normalised rows, f32/f64; labels: (B) i64; `tiles`: how the B x B
// similarities s_ij = e_i . e_j are streamed (ops/pair_tiles.h; no kernel holds the matrix).
// Scalar rules and pair conventions: ops/metric_rules.h.
//
// ArcFace -> w: (D, C) L2-normalised class weights in PML's layout, a class's weights a column,
// rows w.stride(0) >= C apart, unit column stride (normalize_columns pads the rows: Note [Padded
// rows] in ops/padded_rows.h), e's dtype; margin in radians. Logits
// x_ic = arcface_logit(c == y_i, e_i . w_c, margin, scale); stats (B) f64: lse_i = log sum_c
// exp(x_ic); loss (0-d, e's dtype): the mean over rows of lse_i - x_iy_i (0 for B = 0); de (B, D)
// contiguous and dw (D, C) with w's strides, each defined where that gradient is wanted: the
// loss's gradient at grad 1 (Note [Gradient in the forward] in ops/cpu/triplet_tiled.cpp; the CPU
// computes only the defined ones, CUDA both). The B x C cosines are never held whole (CPU: blocks
// of whole rows or tiles, `tiles` bounding both). A label outside [0, C) is an Error naming it.
void arcface_forward(const PairTiles& tiles, const Tensor& e, const Tensor& w, const Tensor& labels, double margin,
                     double scale, const Tensor& stats, const Tensor& loss, const Tensor& de, const Tensor& dw);
//
// Multi-Similarity (MultiSimilarityParams: alpha, beta, base) -> stats (B, 2) f64: per row i
// [lp_i, ln_i], the log(1 + sum exp) over its positives and its negatives (ops/metric_rules.h);
// loss (0-d, e's dtype): the mean over the B rows of lp_i / alpha + ln_i / beta (0 when B is 0).
void multi_similarity_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels,
                              const MultiSimilarityParams& params, const Tensor& stats, const Tensor& loss);
// grad (0-d, e's dtype), e, labels, stats as above -> de (B, D) = grad * dloss/de.
void multi_similarity_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                               const MultiSimilarityParams& params, const Tensor& stats, const Tensor& de);
//
// Contrastive (L2 distances d_ij = ||e_i - e_j||, Note [L2 distances] in ops/metric_rules.h) ->
// counts (2) f64: [P, N], the positive-pair terms relu(d_ij - pos_margin) > 0 and the
// negative-pair terms relu(neg_margin - d_ij) > 0 (both orders of a pair count); loss (0-d, e's
// dtype): sum of the positive terms / P (poison when P is 0) + sum of the negative terms / N
// (likewise). poison (0-d, e's dtype): sum(embeddings * 0), Note [Non-finite embeddings] in
// ops/metric_rules.h (the same for every loss below that takes it).
void contrastive_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double pos_margin,
                         double neg_margin, const Tensor& poison, const Tensor& counts, const Tensor& loss);
// grad (0-d, e's dtype), e, labels, counts as above -> de (B, D) = grad * dloss/de.
void contrastive_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                          double pos_margin, double neg_margin, const Tensor& counts, const Tensor& de);

//
// NT-Xent -> stats (B, 2) f64: per anchor i [lse_i, G_i], lse_i = log sum over its negatives k of
// exp(s_ik / t), G_i = the sum over its positive pairs of dloss/dz; loss (0-d, e's dtype): the
// mean over positive pairs (i, j) of -log(sigmoid(s_ij / t - lse_i) + small_val); pairs (0-d f64):
// their number. A batch without a positive or without a negative pair gives loss poison and
// pairs 0.
void ntxent_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                    const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& pairs);
// grad (0-d, e's dtype), e, labels, stats, pairs as above -> de (B, D) = grad * dloss/de (0 when
// pairs is 0).
void ntxent_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                     double temperature, const Tensor& stats, const Tensor& pairs, const Tensor& de);
//
// ProxyAnchor -> p: (C, D) contiguous L2-normalised proxies, e's dtype; s_ic = e_i . p_c.
// stats (C, 2) f64: per class [pos_c, neg_c] (metric_rules.h); present (0-d f64): the classes with
// a member in the batch; loss (0-d, e's dtype) = sum pos_c / present + sum neg_c / C (0 when
// present is 0); de (B, D), dp (C, D), each defined where that gradient is wanted: the loss's
// gradient at grad 1, as for ArcFace. A label outside [0, C) is an Error naming it.
void proxy_anchor_forward(const PairTiles& tiles, const Tensor& e, const Tensor& p, const Tensor& labels,
                          double margin, double alpha, const Tensor& stats, const Tensor& present, const Tensor& loss,
                          const Tensor& de, const Tensor& dp);
//
// SupCon -> stats (B, 3) f64: per anchor i [lse_i, P_i, loss_i], lse_i = log sum over every
// j != i of exp(s_ij / t), P_i its positives, loss_i = supcon_anchor_loss (ops/metric_rules.h);
// loss (0-d, e's dtype): the mean of the anchors' losses that are > 0 (PML's AvgNonZeroReducer);
// anchors (0-d f64): their number. A batch without a positive or without a negative pair, or
// with no anchor loss > 0, gives loss poison and anchors 0.
void supcon_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double temperature,
                    const Tensor& poison, const Tensor& stats, const Tensor& loss, const Tensor& anchors);
// grad (0-d, e's dtype), e, labels, stats, anchors as above -> de (B, D) = grad * dloss/de (0
// when anchors is 0).
void supcon_backward(const PairTiles& tiles, const Tensor& grad, const Tensor& e, const Tensor& labels,
                     double temperature, const Tensor& stats, const Tensor& anchors, const Tensor& de);

//
// Triplet margin over every triplet (a, p, n), p a positive and n a negative of a (L2 distances)
// -> loss (0-d, e's dtype): the mean of the terms relu(d_ap - d_an + margin) > 0, poison when none;
// triplets (0-d f64): their number; term_grad, unless undefined: (B, D) of e's dtype, the
// gradient of the sum of those terms, 0 when none (Note [Gradient in the forward] in
// ops/cpu/triplet_tiled.cpp: d loss / de is grad / triplets of it). The triplets are never
// listed: per anchor its positives' thresholds d_ap + margin meet its negatives' distances, in
// symmetric tiles (CPU, small classes), sorted (CPU, others) or scanned (CUDA).
void triplet_forward(const PairTiles& tiles, const Tensor& e, const Tensor& labels, double margin,
                     const Tensor& poison, const Tensor& loss, const Tensor& triplets, const Tensor& term_grad);
// Given triplets: anchors, positives, negatives (T) i64 in [0, B) -> dists (T, 2) f64 [d_ap, d_an],
// loss (0-d, e's dtype) and triplets (0-d f64) as above, over these T triplets.
void triplet_mined_forward(const Tensor& e, const Tensor& anchors, const Tensor& positives, const Tensor& negatives,
                           double margin, const Tensor& poison, const Tensor& dists, const Tensor& loss,
                           const Tensor& triplets);
// grad (0-d), e, the indices, dists, triplets as above -> de (B, D) = grad * dloss/de.
void triplet_mined_backward(const Tensor& grad, const Tensor& e, const Tensor& anchors, const Tensor& positives,
                            const Tensor& negatives, double margin, const Tensor& dists, const Tensor& triplets,
                            const Tensor& de);
// BatchHardMiner -> hardest (B, 2) i64: per anchor i the positive with the largest d_ij and the
// negative with the smallest (ties: the smaller index; NaN wins, as with torch.max: ArgMax in
// ops/metric_rules.h), -1 where i has none.
void batch_hard_mine(const PairTiles& tiles, const Tensor& e, const Tensor& labels, const Tensor& hardest);

// ---- non-finite values (nonfinite.cpp; anomaly mode, Note [Anomaly mode] in autograd/anomaly_mode.cpp) ----
// x: contiguous f32/f64, any shape -> out: (3) i64 contiguous on x's device: [number of NaN
// elements, number of infinite elements, flat index of the first non-finite element or -1].
void count_nonfinite(const Tensor& x, const Tensor& out);
// CPU only. x: contiguous f32, f64, bf16 or f16. Whether every element is finite: one streaming
// pass over the bit patterns (Note [Non-finite values on the grid] in ops/cpu/conv.cpp).
bool all_finite(const Tensor& x);
// The metric losses' poison and gate (Note [Non-finite embeddings] in ops/metric_rules.h):
// x: contiguous f32/f64, any shape -> poison: 0-d, x's dtype: PML's zero_loss sum(x * 0), i.e. 0
// when every element is finite, else NaN.
void nonfinite_poison(const Tensor& x, const Tensor& poison);
// grad: contiguous f32/f64, counted: (k) f64 contiguous (term counts, >= 0), poison: 0-d grad's
// dtype -> out (grad's shape, contiguous): grad + poison when some count is > 0, else 0.
void zero_loss_gate(const Tensor& grad, const Tensor& counted, const Tensor& poison, const Tensor& out);

}  // namespace ember::cpu

namespace ember {

// ---- the stubs: <name>_kernel runs cpu::<name> or its CUDA binding --------------------------------
EMBER_DEVICE_KERNEL(unary);
EMBER_DEVICE_KERNEL(binary);
EMBER_DEVICE_KERNEL(compare);
EMBER_DEVICE_KERNEL(where);
EMBER_DEVICE_KERNEL(copy);
EMBER_DEVICE_KERNEL(fill);
EMBER_DEVICE_KERNEL(arange);
EMBER_DEVICE_KERNEL(uniform);
EMBER_DEVICE_KERNEL(normal);
EMBER_DEVICE_KERNEL(randint);
EMBER_DEVICE_KERNEL(reduce);
EMBER_DEVICE_KERNEL(arg_reduce);
EMBER_DEVICE_KERNEL(bmm);
EMBER_DEVICE_KERNEL(index_select);
EMBER_DEVICE_KERNEL(index_add);
EMBER_DEVICE_KERNEL(gather);
EMBER_DEVICE_KERNEL(scatter_add);
EMBER_DEVICE_KERNEL(sgd_step);
EMBER_DEVICE_KERNEL(adam_step);
EMBER_DEVICE_KERNEL(batch_norm_stats);
EMBER_DEVICE_KERNEL(batch_norm_apply);
EMBER_DEVICE_KERNEL(batch_norm_backward);
EMBER_DEVICE_KERNEL(softmax_forward);
EMBER_DEVICE_KERNEL(softmax_backward);
EMBER_DEVICE_KERNEL(cross_entropy_forward);
EMBER_DEVICE_KERNEL(cross_entropy_backward);
EMBER_DEVICE_KERNEL(nll_loss_forward);
EMBER_DEVICE_KERNEL(nll_loss_backward);
EMBER_DEVICE_KERNEL(dropout);
EMBER_DEVICE_KERNEL(conv2d_forward);
EMBER_DEVICE_KERNEL(conv2d_input_grad);
EMBER_DEVICE_KERNEL(conv2d_weight_grad);
EMBER_DEVICE_KERNEL(bias_activation_backward);
EMBER_DEVICE_KERNEL(max_pool2d_forward);
EMBER_DEVICE_KERNEL(max_pool2d_backward);
EMBER_DEVICE_KERNEL(avg_pool2d_forward);
EMBER_DEVICE_KERNEL(avg_pool2d_backward);
EMBER_DEVICE_KERNEL(adaptive_avg_pool2d_forward);
EMBER_DEVICE_KERNEL(adaptive_avg_pool2d_backward);
EMBER_DEVICE_KERNEL(linear_forward);
EMBER_DEVICE_KERNEL(normalize_rows_forward);
EMBER_DEVICE_KERNEL(normalize_rows_backward);
EMBER_DEVICE_KERNEL(normalize_columns_forward);
EMBER_DEVICE_KERNEL(normalize_columns_backward);
EMBER_DEVICE_KERNEL(arcface_forward);
EMBER_DEVICE_KERNEL(batch_hard_mine);
EMBER_DEVICE_KERNEL(contrastive_forward);
EMBER_DEVICE_KERNEL(contrastive_backward);
EMBER_DEVICE_KERNEL(multi_similarity_forward);
EMBER_DEVICE_KERNEL(multi_similarity_backward);
EMBER_DEVICE_KERNEL(ntxent_forward);
EMBER_DEVICE_KERNEL(ntxent_backward);
EMBER_DEVICE_KERNEL(proxy_anchor_forward);
EMBER_DEVICE_KERNEL(supcon_forward);
EMBER_DEVICE_KERNEL(supcon_backward);
EMBER_DEVICE_KERNEL(triplet_forward);
EMBER_DEVICE_KERNEL(triplet_mined_forward);
EMBER_DEVICE_KERNEL(triplet_mined_backward);
EMBER_DEVICE_KERNEL(scale_add_relu_forward);
EMBER_DEVICE_KERNEL(scale_add_relu_backward);
EMBER_DEVICE_KERNEL(count_nonfinite);
EMBER_DEVICE_KERNEL(nonfinite_poison);
EMBER_DEVICE_KERNEL(zero_loss_gate);

// Copies between two contiguous tensors of one dtype on different devices. Installed by the
// CUDA backend (ops/cuda/cross_device_copy.cpp); null when there is only the CPU.
using CrossDeviceCopy = void (*)(const Tensor& src, const Tensor& dst);
void set_cross_device_copy(CrossDeviceCopy fn);
CrossDeviceCopy cross_device_copy();

}  // namespace ember
