// One table of op cases, in the style of ggml's test-backend-ops. For every case:
//   (a) an f64 finite-difference gradcheck with the inputs contiguous, permuted and strided
//       (and the forward values of the three layouts agree);
//   (b) f32 forward values and gradients against PyTorch (tests/data/ops_fixtures.safetensors,
//       written by tests/data/make_fixtures.py, which also draws the inputs);
//   (c) where a cuda device exists (the simulator in CI): f64 values and gradients on cuda equal
//       the CPU's, and an f64 gradcheck on cuda.
// The neural-network ops (conv2d, pooling, softmax, cross_entropy / nll_loss, batch_norm, linear,
// dropout) and the metric-learning losses are cases too: integer targets, labels and running
// stats are constants made inside the case, so every evaluation sees the same ones; dropout
// draws from a fresh Generator(seed) each call.
// Broadcast and expanded operands are cases of their own (the expand happens inside the op
// function, since gradcheck perturbs its leaves in place and they must not overlap).
// Cases at inf, NaN, zeros, ties and constant slices (issue #12) are flagged kSingular: (a) and
// (c) skip their gradcheck, and the values and gradients, PyTorch's included, compare NaN for NaN.
// A new case needs a line here and the same-named line in make_fixtures.py.
#include <set>

#include "cuda/runtime.h"

#include "support/test_support.h"

using namespace ember;
using autograd::TensorList;

namespace {

using OpFn = std::function<Tensor(const TensorList&)>;

enum CaseFlags : unsigned {
  kContiguousOnly = 1u << 0,  // the op requires a contiguous input (view)
  kCoarseEps = 1u << 1,       // goes through f32 inside: finite differences need a large eps
  kSingular = 1u << 2,        // inputs at inf, NaN or a singular point: no gradcheck, only PyTorch's
                              // values and gradients (and cuda == cpu), compared NaN for NaN
};

struct OpCase {
  const char* name;
  std::vector<Shape> shapes;
  OpFn build;
  unsigned flags = 0;
};

#define OP1(expr) [](const TensorList& in) -> Tensor { const Tensor& x = in[0]; return expr; }
#define OP2(expr) [](const TensorList& in) -> Tensor { const Tensor& a = in[0]; const Tensor& b = in[1]; return expr; }

// The device the constant operands below are made on: the cpu, or cuda while the table runs
// there (test "every case on cuda").
Device g_constants_device = Device::cpu();

// The constant operands of make_fixtures.py.
Tensor bools(std::vector<uint8_t> v, Shape shape) {
  return tensor<uint8_t>(v, shape).to(DType::boolean).to(g_constants_device);
}
Tensor cond_3x4() { return bools({1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 0, 0}, {3, 4}); }
Tensor mask_4() { return bools({1, 0, 0, 1}, {4}); }
Tensor ids(std::vector<int64_t> v, Shape shape) { return tensor<int64_t>(v, shape).to(g_constants_device); }

Tensor split_case(const Tensor& x) {
  auto p = split(x, 2, 1);
  return cat({p[2], p[0], mul(p[1], 2.0)}, 1);
}
Tensor chunk_case(const Tensor& x) {
  auto p = chunk(x, 3, 0);
  return sub(p[1], mul(p[0], 2.0));
}
Tensor to_dtype_case(const Tensor& x) {
  const DType other = x.dtype() == DType::f64 ? DType::f32 : DType::f64;
  return mul(x.to(other), 2.0).to(x.dtype());
}

// ---- the neural-network cases (constants as in make_fixtures.py's NN_CASES)
Tensor ce_target() { return ids({1, 0, 3, -100, 2}, {5}); }
Tensor ce_target_4d() { return ids({0, 2, 1, -100, 3, 3, 2, 0, 1, 2, 0, 1}, {2, 2, 3}); }
Tensor ce_target_ignore1() { return ids({0, 1, 2, 1}, {4}); }
// The labels of the metric-loss cases (METRIC_LABELS in make_fixtures.py): classes of 3, 2, 2
// and 1 members, so there are positive pairs, negative pairs and an anchor with no positive.
Tensor metric_labels() { return ids({0, 1, 2, 0, 1, 2, 0, 3}, {8}); }
// The given triplets of the mined triplet case (TRIPLET_* in make_fixtures.py).
Triplets mined_triplets() {
  return {ids({0, 3, 6, 1, 4, 2, 5, 0, 7}, {9}), ids({3, 6, 0, 4, 1, 5, 2, 6, 7}, {9}),
          ids({1, 2, 7, 0, 5, 3, 1, 4, 0}, {9})};
}

// The optional last input of a layer (bias) or the pair after x (batch_norm's weight, bias).
Tensor input_or_none(const TensorList& in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

// conv2d(x, w[, b]) with the given geometry and fused activation.
OpFn conv(IntPair stride = 1, IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1,
          Activation act = Activation::none) {
  return [=](const TensorList& in) {
    return conv2d(in[0], in[1], input_or_none(in, 2), stride, padding, dilation, groups, act);
  };
}

// linear(x, w[, b]) with a fused activation.
OpFn linear_case(Activation act = Activation::none) {
  return [=](const TensorList& in) { return linear(in[0], in[1], input_or_none(in, 2), act); };
}

// batch_norm(x[, weight, bias]) with fresh running stats (momentum 0.1, eps 1e-5): training
// updates them in place, so each evaluation starts from the same ones.
OpFn batch_norm_case(bool training, Activation act = Activation::none) {
  return [=](const TensorList& in) {
    const Tensor& x = in[0];
    Tensor running_mean = tensor<double>({0.1, -0.2, 0.3}).to(x.dtype()).to(x.device());
    Tensor running_var = tensor<double>({0.5, 1.5, 0.8}).to(x.dtype()).to(x.device());
    return batch_norm(x, input_or_none(in, 1), input_or_none(in, 2), running_mean, running_var, training, 0.1, 1e-5,
                      act);
  };
}

// dropout(x, p) in training with a fresh Generator(seed): the same mask on every call.
OpFn dropout_case(double p, uint64_t seed) {
  return [=](const TensorList& in) {
    Generator gen(seed);
    return dropout(in[0], p, true, &gen);
  };
}

const Shape A{3, 4}, X3{2, 3, 4};
constexpr Activation kRelu = Activation::relu, kTanh = Activation::tanh, kSigmoid = Activation::sigmoid;
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<OpCase>& op_table() {
  static const std::vector<OpCase> table = {
      // ---- unary
      {"neg", {A}, OP1(neg(x))},
      {"abs", {A}, OP1(abs(x))},
      {"exp", {A}, OP1(exp(x))},
      {"log", {A}, OP1(log(x))},
      {"log1p", {A}, OP1(log1p(x))},
      {"sqrt", {A}, OP1(sqrt(x))},
      {"rsqrt", {A}, OP1(rsqrt(x))},
      {"square", {A}, OP1(square(x))},
      {"relu", {A}, OP1(relu(x))},
      {"sigmoid", {A}, OP1(sigmoid(x))},
      {"tanh", {A}, OP1(tanh(x))},
      {"gelu", {A}, OP1(gelu(x))},
      {"softplus", {A}, OP1(softplus(x))},
      {"exp_expanded", {{1, 4}}, OP1(exp(x.expand({3, 4})))},
      {"tanh_rank3", {X3}, OP1(tanh(x))},
      // ---- binary, with broadcasting
      {"add", {A, A}, OP2(add(a, b))},
      {"add_bcast", {{3, 1}, {1, 4}}, OP2(add(a, b))},
      {"add_bcast_rank", {X3, {4}}, OP2(add(a, b))},
      {"add_scalar", {A}, OP1(x + 2.5)},
      {"sub", {A, A}, OP2(sub(a, b))},
      {"sub_bcast", {X3, {3, 1}}, OP2(sub(a, b))},
      {"rsub_scalar", {A}, OP1(1.5 - x)},
      {"mul", {A, A}, OP2(mul(a, b))},
      {"mul_bcast", {{3, 1}, {1, 4}}, OP2(mul(a, b))},
      {"mul_expanded", {{1, 4}, {3, 1}}, OP2(mul(a.expand({3, 4}), b.expand({3, 4})))},
      {"mul_scalar", {A}, OP1(x * -3.0)},
      {"div", {A, A}, OP2(div(a, b))},
      {"div_bcast", {X3, {4}}, OP2(div(a, b))},
      {"rdiv_scalar", {A}, OP1(2.0 / x)},
      {"pow", {A, A}, OP2(pow(a, b))},
      {"pow_bcast", {A, {4}}, OP2(pow(a, b))},
      {"pow_scalar", {A}, OP1(pow(x, 3.0))},
      {"pow_half", {A}, OP1(pow(x, 0.5))},
      {"maximum", {A, A}, OP2(maximum(a, b))},
      {"maximum_bcast", {A, {4}}, OP2(maximum(a, b))},
      {"maximum_scalar", {A}, OP1(maximum(x, 0.25))},
      {"minimum", {A, A}, OP2(minimum(a, b))},
      {"minimum_bcast", {{3, 1}, A}, OP2(minimum(a, b))},
      {"clamp", {A}, OP1(clamp(x, -0.5, 1.0))},
      {"clamp_lo", {A}, OP1(clamp(x, -0.5, std::nullopt))},
      {"clamp_hi", {A}, OP1(clamp(x, std::nullopt, 0.5))},
      {"where", {A, A}, OP2(where(cond_3x4(), a, b))},
      {"where_bcast", {{3, 1}, {4}}, OP2(where(cond_3x4(), a, b))},
      {"masked_fill", {A}, OP1(masked_fill(x, mask_4(), -1.5))},
      // ---- reductions
      {"sum_all", {X3}, OP1(sum(x))},
      {"sum_dims_keep", {X3}, OP1(sum(x, {0, 2}, true))},
      {"sum_last", {X3}, OP1(sum(x, {-1}))},
      {"sum_middle", {X3}, OP1(sum(x, {1}))},
      {"mean_all", {X3}, OP1(mean(x))},
      {"mean_dim", {X3}, OP1(mean(x, {1}))},
      {"var_all", {X3}, OP1(var(x))},
      {"var_dim", {X3}, OP1(var(x, {1}))},
      {"var_dims_keep", {X3}, OP1(var(x, {0, 2}, 1, true))},
      {"var_biased", {X3}, OP1(var(x, {1}, 0))},
      {"stddev_all", {X3}, OP1(stddev(x))},
      {"stddev_dim", {X3}, OP1(stddev(x, {2}))},
      {"amax_dim", {X3}, OP1(amax(x, {1}))},
      {"amax_all", {X3}, OP1(amax(x))},
      {"amin_dims_keep", {X3}, OP1(amin(x, {0, 2}, true))},
      {"max_dim", {X3}, OP1(max(x, 1).values)},
      {"min_dim_keep", {X3}, OP1(min(x, 0, true).values)},
      {"max_all", {X3}, OP1(max(x))},
      {"logsumexp_dim", {X3}, OP1(logsumexp(x, {1}))},
      {"logsumexp_keep", {X3}, OP1(logsumexp(x, {0, 2}, true))},
      {"norm1", {X3}, OP1(norm(x, 1.0, {1}))},
      {"norm2", {X3}, OP1(norm(x, 2.0, {1}))},
      {"norm2_all", {X3}, OP1(norm(x))},
      {"norm2_keep", {X3}, OP1(norm(x, 2.0, {0, 2}, true))},
      {"norminf", {X3}, OP1(norm(x, kInf, {2}))},
      {"norm3", {X3}, OP1(norm(x, 3.0, {1}))},
      // ---- matmul
      {"matmul_mm", {A, {4, 5}}, OP2(matmul(a, b))},
      {"matmul_mv", {A, {4}}, OP2(matmul(a, b))},
      {"matmul_vm", {{4}, {4, 5}}, OP2(matmul(a, b))},
      {"matmul_dot", {{4}, {4}}, OP2(matmul(a, b))},
      {"matmul_bmm", {X3, {2, 4, 5}}, OP2(matmul(a, b))},
      {"matmul_bcast_batch", {{2, 1, 3, 4}, {3, 4, 5}}, OP2(matmul(a, b))},
      {"matmul_batched_2d", {X3, {4, 5}}, OP2(matmul(a, b))},
      {"matmul_vec_batched", {{4}, {2, 4, 5}}, OP2(matmul(a, b))},
      {"matmul_expanded", {{1, 3, 4}, {2, 4, 5}}, OP2(matmul(a.expand({2, 3, 4}), b))},
      // ---- shapes and views
      {"reshape", {X3}, OP1(x.reshape({6, 4}))},
      {"reshape_infer", {X3}, OP1(x.reshape({4, -1}))},
      {"view", {X3}, OP1(x.view({2, 12})), kContiguousOnly},
      {"permute", {X3}, OP1(x.permute({2, 0, 1}))},
      {"transpose", {X3}, OP1(x.transpose(0, 2))},
      {"flatten", {X3}, OP1(x.flatten(1))},
      {"squeeze", {{2, 1, 3}}, OP1(x.squeeze())},
      {"squeeze_dim", {{2, 1, 3}}, OP1(x.squeeze(1))},
      {"unsqueeze", {{2, 3}}, OP1(x.unsqueeze(1))},
      {"expand", {{3, 1}}, OP1(x.expand({2, 3, 4}))},
      {"narrow", {{3, 5}}, OP1(x.narrow(1, 1, 3))},
      {"slice_step", {{3, 6}}, OP1(x.slice(1, 1, 6, 2))},
      {"select", {A}, OP1(x.select(1, 2))},
      {"select_neg", {A}, OP1(x.select(0, -1))},
      {"cat", {{2, 3}, {2, 2}}, OP2(cat({a, b}, 1))},
      {"cat0", {{2, 3}, {1, 3}}, OP2(cat({a, b}, 0))},
      {"stack", {{2, 3}, {2, 3}}, OP2(stack({a, b}, 1))},
      {"split", {{3, 5}}, OP1(split_case(x))},
      {"chunk", {{4, 3}}, OP1(chunk_case(x))},
      // ---- indexing
      {"index_select", {A}, OP1(index_select(x, 1, ids({2, 0, 2}, {3})))},
      {"index_add", {{4, 3}, {3, 3}}, OP2(index_add(a, 0, ids({0, 2, 0}, {3}), b))},
      {"gather", {A}, OP1(gather(x, 1, ids({0, 3, 1, 1, 2, 0}, {3, 2})))},
      {"gather0", {A}, OP1(gather(x, 0, ids({0, 1, 2, 0, 2, 2, 1, 0}, {2, 4})))},
      {"scatter_add", {A, {2, 3}}, OP2(scatter_add(a, 1, ids({0, 1, 3, 3, 3, 0}, {2, 3}), b))},
      // ---- copies
      {"clone", {A}, OP1(x.clone())},
      {"to_dtype", {A}, OP1(to_dtype_case(x)), kCoarseEps},
      // ---- conv2d (x, w[, b])
      {"conv2d", {{2, 2, 5, 4}, {3, 2, 3, 3}, {3}}, conv()},
      {"conv2d_stride_pad", {{1, 2, 6, 6}, {2, 2, 3, 3}, {2}}, conv(2, 1)},
      {"conv2d_dilation", {{1, 2, 7, 6}, {2, 2, 3, 2}}, conv(1, {2, 1}, 2)},
      {"conv2d_groups", {{1, 4, 5, 5}, {4, 2, 3, 2}, {4}}, conv({2, 1}, {1, 0}, 1, 2)},
      {"conv2d_depthwise", {{1, 3, 5, 5}, {3, 1, 3, 3}, {3}}, conv(1, 1, 1, 3)},
      {"conv2d_pointwise", {{2, 3, 3, 3}, {4, 3, 1, 1}, {4}}, conv()},
      {"conv2d_relu", {{1, 2, 5, 4}, {3, 2, 3, 3}, {3}}, conv(1, 1, 1, 1, kRelu)},
      {"conv2d_groups_tanh", {{1, 4, 4, 4}, {4, 2, 2, 2}, {4}}, conv(2, 0, 1, 2, kTanh)},
      {"conv2d_depthwise_sigmoid", {{1, 2, 5, 5}, {2, 1, 3, 3}}, conv(1, 1, 2, 2, kSigmoid)},
      // ---- pooling
      {"max_pool2d", {{1, 2, 4, 4}}, OP1(max_pool2d(x, 2))},
      {"max_pool2d_pad", {{1, 2, 5, 5}}, OP1(max_pool2d(x, 3, 2, 1))},
      {"max_pool2d_nonsquare", {{1, 2, 4, 5}}, OP1(max_pool2d(x, {2, 3}, IntPair{1, 2}, 1))},
      {"avg_pool2d", {{1, 2, 4, 4}}, OP1(avg_pool2d(x, 2))},
      {"avg_pool2d_pad_include", {{1, 2, 5, 5}}, OP1(avg_pool2d(x, 3, 2, 1, true))},
      {"avg_pool2d_pad_exclude", {{1, 2, 5, 5}}, OP1(avg_pool2d(x, 3, 2, 1, false))},
      {"avg_pool2d_nonsquare", {{1, 2, 5, 6}}, OP1(avg_pool2d(x, {3, 2}, IntPair{1, 2}, {1, 0}, false))},
      {"adaptive_avg_pool2d_global", {{2, 3, 3, 4}}, OP1(adaptive_avg_pool2d(x, 1))},
      {"adaptive_avg_pool2d_uneven", {{1, 2, 5, 7}}, OP1(adaptive_avg_pool2d(x, {3, 2}))},
      {"adaptive_avg_pool2d_upsample", {{1, 2, 3, 2}}, OP1(adaptive_avg_pool2d(x, {5, 3}))},
      // ---- softmax
      {"softmax_first", {X3}, OP1(softmax(x, 0))},
      {"softmax_mid", {X3}, OP1(softmax(x, 1))},
      {"softmax_last", {X3}, OP1(softmax(x, -1))},
      {"log_softmax_first", {X3}, OP1(log_softmax(x, 0))},
      {"log_softmax_mid", {X3}, OP1(log_softmax(x, 1))},
      {"log_softmax_last", {X3}, OP1(log_softmax(x, -1))},
      // ---- losses (integer targets are constants; -100 is the default ignore_index)
      {"cross_entropy", {{5, 4}}, OP1(cross_entropy(x, ce_target()))},
      {"cross_entropy_none", {{5, 4}}, OP1(cross_entropy(x, ce_target(), Reduction::none))},
      {"cross_entropy_sum", {{5, 4}}, OP1(cross_entropy(x, ce_target(), Reduction::sum))},
      {"cross_entropy_smooth", {{5, 4}}, OP1(cross_entropy(x, ce_target(), Reduction::mean, 0.15))},
      {"cross_entropy_smooth_none", {{5, 4}}, OP1(cross_entropy(x, ce_target(), Reduction::none, 0.15))},
      {"cross_entropy_ignore_class", {{4, 3}}, OP1(cross_entropy(x, ce_target_ignore1(), Reduction::mean, 0.0, 1))},
      {"cross_entropy_4d", {{2, 4, 2, 3}}, OP1(cross_entropy(x, ce_target_4d()))},
      {"cross_entropy_4d_smooth_none", {{2, 4, 2, 3}}, OP1(cross_entropy(x, ce_target_4d(), Reduction::none, 0.1))},
      {"nll_loss", {{5, 4}}, OP1(nll_loss(x, ce_target()))},
      {"nll_loss_none", {{5, 4}}, OP1(nll_loss(x, ce_target(), Reduction::none))},
      {"nll_loss_4d_sum", {{2, 4, 2, 3}}, OP1(nll_loss(x, ce_target_4d(), Reduction::sum))},
      // ---- batch_norm (x[, weight, bias])
      {"batch_norm_train", {{5, 3}, {3}, {3}}, batch_norm_case(true)},
      {"batch_norm_train_4d", {{2, 3, 3, 2}, {3}, {3}}, batch_norm_case(true)},
      {"batch_norm_train_noaffine", {{4, 3, 2}}, batch_norm_case(true)},
      {"batch_norm_eval", {{5, 3}, {3}, {3}}, batch_norm_case(false)},
      {"batch_norm_eval_4d", {{2, 3, 3, 2}, {3}, {3}}, batch_norm_case(false)},
      {"batch_norm_eval_noaffine", {{2, 3, 2, 2}}, batch_norm_case(false)},
      {"batch_norm_train_relu", {{2, 3, 3, 2}, {3}, {3}}, batch_norm_case(true, kRelu)},
      {"batch_norm_train_sigmoid", {{5, 3}, {3}, {3}}, batch_norm_case(true, kSigmoid)},
      {"batch_norm_eval_tanh", {{5, 3}, {3}, {3}}, batch_norm_case(false, kTanh)},
      // ---- linear (x, w[, b])
      {"linear", {A, {5, 4}, {5}}, linear_case()},
      {"linear_1d", {{4}, {3, 4}, {3}}, linear_case()},
      {"linear_3d_nobias", {X3, {6, 4}}, linear_case()},
      {"linear_relu", {A, {5, 4}, {5}}, linear_case(kRelu)},
      {"linear_3d_tanh", {X3, {5, 4}, {5}}, linear_case(kTanh)},
      {"linear_sigmoid_nobias", {A, {2, 4}}, linear_case(kSigmoid)},
      // ---- dropout with a fixed generator (the fixture recomputes ember's Philox mask)
      {"dropout", {A}, dropout_case(0.4, 5)},
      {"dropout_rank3", {X3}, dropout_case(0.25, 7)},
      // ---- metric losses (embeddings (8, 5), metric_labels())
      {"multi_similarity", {{8, 5}}, OP1(multi_similarity_loss(x, metric_labels()))},
      {"multi_similarity_soft", {{8, 5}},
       OP1(multi_similarity_loss(x, metric_labels(), {.alpha = 1, .beta = 10, .base = 0.3}))},
      {"ntxent", {{8, 5}}, OP1(ntxent_loss(x, metric_labels()))},
      {"ntxent_t05", {{8, 5}}, OP1(ntxent_loss(x, metric_labels(), {.temperature = 0.5}))},
      {"supcon", {{8, 5}}, OP1(supcon_loss(x, metric_labels()))},
      {"supcon_t05", {{8, 5}}, OP1(supcon_loss(x, metric_labels(), {.temperature = 0.5}))},
      // ArcFace (embeddings (8, 5), W (5, 4) as PML stores it; both differentiable)
      {"arcface", {{8, 5}, {5, 4}}, OP2(arcface_loss(a, metric_labels(), b))},
      {"arcface_m40_s3", {{8, 5}, {5, 4}},
       OP2(arcface_loss(a, metric_labels(), b, {.margin_degrees = 40, .scale = 3}))},
      // ProxyAnchor (embeddings (8, 5), proxies (6, 5): classes 4 and 5 have no member)
      {"proxy_anchor", {{8, 5}, {6, 5}}, OP2(proxy_anchor_loss(a, metric_labels(), b))},
      {"proxy_anchor_m02_a4", {{8, 5}, {6, 5}},
       OP2(proxy_anchor_loss(a, metric_labels(), b, {.margin = 0.2, .alpha = 4}))},
      {"contrastive", {{8, 5}}, OP1(contrastive_loss(x, metric_labels()))},
      {"contrastive_margins", {{8, 5}},
       OP1(contrastive_loss(x, metric_labels(), {.pos_margin = 0.3, .neg_margin = 1.2}))},
      {"triplet", {{8, 5}}, OP1(triplet_margin_loss(x, metric_labels()))},
      {"triplet_m03", {{8, 5}}, OP1(triplet_margin_loss(x, metric_labels(), {.margin = 0.3}))},
      {"triplet_mined", {{8, 5}}, OP1(triplet_margin_loss(x, metric_labels(), mined_triplets(), {.margin = 0.2}))},
      // ---- the fused SE tail (x, scale, residual); 5 x 7 planes run the CPU's 16-lane loop and its tail
      {"scale_add_relu", {{2, 3, 2, 3}, {2, 3}, {2, 3, 2, 3}},
       [](const TensorList& in) { return scale_add_relu(in[0], in[1], in[2]); }},
      {"scale_add_relu_5x7", {{1, 2, 5, 7}, {1, 2}, {1, 2, 5, 7}},
       [](const TensorList& in) { return scale_add_relu(in[0], in[1], in[2]); }},
      // ---- conv2d at SE-ResNeXt's kinds of shape: grouped with 2 channels per group and output
      // rows of 16 or more (the CPU's direct algorithm, Note [Conv algorithms]), 1x1 stride 2
      {"conv2d_groups4_stride2", {{1, 8, 2, 31}, {8, 2, 3, 3}, {8}}, conv(2, 1, 1, 4)},
      {"conv2d_groups4_relu", {{1, 8, 2, 16}, {8, 2, 3, 3}}, conv(1, 1, 1, 4, kRelu)},
      {"conv2d_pointwise_stride2", {{2, 4, 5, 5}, {3, 4, 1, 1}}, conv(2)},
      {"conv2d_pointwise_groups2", {{1, 4, 3, 4}, {6, 2, 1, 1}, {6}}, conv(1, 0, 1, 2)},
      // ---- non-finite inputs and singular points (issue #12; SINGULAR_CASES in make_fixtures.py
      // holds the inputs, and UPSTREAM the non-finite upstream gradients of the *_infgrad cases)
      {"logsumexp_nonfinite", {{5, 3}}, OP1(logsumexp(x, {1})), kSingular},
      {"logsumexp_nonfinite_dim0", {{3, 5}}, OP1(logsumexp(x, {0})), kSingular},
      {"stddev_constant", {{3, 4}}, OP1(stddev(x, {1})), kSingular},
      {"stddev_constant_all", {{2, 3}}, OP1(stddev(x)), kSingular},
      {"var_nonfinite", {{2, 3}}, OP1(var(x, {1})), kSingular},
      {"pow_singular", {{8}, {8}}, OP2(pow(a, b)), kSingular},
      {"pow_scalar_zero", {{4}}, OP1(pow(x, 0.0)), kSingular},
      {"pow_half_zero", {{5}}, OP1(pow(x, 0.5)), kSingular},
      {"pow_scalar_nonfinite", {{6}}, OP1(pow(x, 1.5)), kSingular},
      {"pow_rsqrt_nonfinite", {{6}}, OP1(pow(x, -0.5)), kSingular},
      {"sqrt_zero", {{4}}, OP1(sqrt(x)), kSingular},
      {"rsqrt_zero", {{4}}, OP1(rsqrt(x)), kSingular},
      {"log_zero", {{4}}, OP1(log(x)), kSingular},
      {"div_zero", {{5}, {5}}, OP2(div(a, b)), kSingular},
      {"norm1_singular", {{4, 3}}, OP1(norm(x, 1.0, {1})), kSingular},
      {"norm2_singular", {{4, 3}}, OP1(norm(x, 2.0, {1})), kSingular},
      {"norm3_singular", {{4, 3}}, OP1(norm(x, 3.0, {1})), kSingular},
      {"norminf_singular", {{4, 3}}, OP1(norm(x, kInf, {1})), kSingular},
      {"norm_p05_singular", {{4, 3}}, OP1(norm(x, 0.5, {1})), kSingular},
      {"norm_p15_singular", {{4, 3}}, OP1(norm(x, 1.5, {1})), kSingular},
      {"var_negative_dof", {{2, 2}}, OP1(var(x, {1}, 3)), kSingular},
      {"stddev_zero_dof", {{2, 2}}, OP1(stddev(x, {1}, 2)), kSingular},
      {"sum_nonfinite", {{5, 3}}, OP1(sum(x, {1})), kSingular},
      {"amax_nan", {{3, 4}}, OP1(amax(x, {1})), kSingular},
      {"amin_nan_dim0", {{4, 3}}, OP1(amin(x, {0})), kSingular},
      {"amax_infgrad", {{3, 4}}, OP1(amax(x, {1})), kSingular},
      {"max_dim_nan", {{3, 4}}, OP1(max(x, 1).values), kSingular},
      {"min_dim_nan_keep", {{4, 3}}, OP1(min(x, 0, true).values), kSingular},
      {"max_all_nan", {{3, 4}}, OP1(max(x)), kSingular},
      {"min_all_ties", {{2, 3}}, OP1(min(x)), kSingular},
      {"maximum_nan", {{6}, {6}}, OP2(maximum(a, b)), kSingular},
      {"minimum_nan_bcast", {{2, 3}, {3}}, OP2(minimum(a, b)), kSingular},
      {"maximum_infgrad", {{5}, {5}}, OP2(maximum(a, b)), kSingular},
      {"clamp_nan", {{8}}, OP1(clamp(x, -0.5, 1.0)), kSingular},
      {"maximum_scalar_nan", {{5}}, OP1(maximum(x, 0.25)), kSingular},
      {"minimum_scalar_nan", {{5}}, OP1(minimum(x, 0.25)), kSingular},
  };
  return table;
}

const test::Fixtures& fixtures() {
  static const test::Fixtures fx("ops_fixtures.safetensors");
  return fx;
}

std::string key(const OpCase& c, const std::string& what) { return std::string(c.name) + "/" + what; }

// The fixture inputs of a case, checked against the table's shapes.
TensorList fixture_inputs(const OpCase& c) {
  TensorList in;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor x = fixtures().get(key(c, "in" + std::to_string(i)));
    EMBER_CHECK(x.shape() == c.shapes[i], c.name, ": fixture input ", i, " has shape ", shape_str(x.shape()),
                ", the table says ", shape_str(c.shapes[i]));
    in.push_back(x);
  }
  EMBER_CHECK(!fixtures().has(key(c, "in" + std::to_string(c.shapes.size()))), c.name,
              ": the fixture has more inputs than the table");
  return in;
}

}  // namespace

TEST_CASE("op table: every case has a fixture and every fixture a case", "[ops][table]") {
  std::set<std::string> in_table, in_file;
  for (const OpCase& c : op_table()) {
    CHECK(in_table.insert(c.name).second);  // names are unique
    CHECK(fixtures().has(key(c, "out")));
  }
  for (const std::string& name : fixtures().names()) in_file.insert(name.substr(0, name.find('/')));
  for (const std::string& name : in_file) {
    INFO("fixture case " << name);
    CHECK(in_table.count(name) == 1);
  }
  CHECK(in_table.size() >= 100);
}

TEST_CASE("op table: f64 gradcheck, contiguous, permuted and strided inputs", "[ops][table][gradcheck]") {
  const test::Layout layouts[] = {test::Layout::contiguous, test::Layout::permuted, test::Layout::strided};
  for (const OpCase& c : op_table()) {
    TensorList base;
    try {
      for (const Tensor& x : fixture_inputs(c)) base.push_back(x.to(DType::f64));
    } catch (const Error& e) {
      FAIL_CHECK(e.what());
      continue;
    }
    GradcheckOptions options;
    if (c.flags & kCoarseEps) options.eps = 1e-2;
    Tensor reference;
    for (test::Layout layout : layouts) {
      if (layout != test::Layout::contiguous && (c.flags & kContiguousOnly)) continue;
      INFO("case " << c.name << ", " << test::layout_name(layout) << " inputs");
      try {
        TensorList in;
        for (const Tensor& x : base) in.push_back(test::relayout(x, layout));
        if (layout != test::Layout::contiguous)
          for (const Tensor& x : in)
            if (x.dim() > 0 && x.numel() > 1) CHECK_FALSE(x.is_contiguous());
        Tensor out = c.build(in);
        if (!reference.defined()) reference = out;
        else test::check_close(out, reference, 1e-12, 1e-12);
        if (c.flags & kSingular) continue;  // finite differences mean nothing at inf, NaN or a kink
        const GradcheckResult r = gradcheck(c.build, in, options);
        INFO(r.report);
        CHECK(r.ok);
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << e.what());
      }
    }
  }
}

TEST_CASE("op table: f32 values and gradients match PyTorch", "[ops][table][fixtures]") {
  for (const OpCase& c : op_table()) {
    INFO("case " << c.name);
    try {
      TensorList in;
      for (const Tensor& x : fixture_inputs(c)) in.push_back(x.clone().requires_grad_());
      Tensor out = c.build(in);
      CHECK(out.dtype() == DType::f32);
      test::check_close(out, fixtures().get(key(c, "out")), 1e-5, 1e-5);
      sum(mul(out, fixtures().get(key(c, "w")))).backward();
      for (size_t i = 0; i < in.size(); ++i) {
        INFO("gradient of input " << i);
        test::check_close(in[i].grad(), fixtures().get(key(c, "grad" + std::to_string(i))), 1e-4, 1e-5);
      }
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
    }
  }
}

namespace {

// (c) for the cases [begin, end) of the table. The table runs on cuda in a few CTest tests, each
// under its own time limit: on the simulator every CUDA thread is an OS thread.
void check_cases_on_cuda(size_t begin, size_t end) {
  for (size_t k = begin; k < std::min(end, op_table().size()); ++k) {
    const OpCase& c = op_table()[k];
    INFO("case " << c.name);
    try {
      TensorList cpu_in, cuda_in;
      for (const Tensor& x : fixture_inputs(c)) {
        cpu_in.push_back(x.to(DType::f64).requires_grad_());
        cuda_in.push_back(x.to(DType::f64).to(Device::cuda()).requires_grad_());
      }
      Tensor w = fixtures().get(key(c, "w")).to(DType::f64);
      Tensor cpu_out = c.build(cpu_in);
      sum(mul(cpu_out, w)).backward();
      g_constants_device = Device::cuda();
      Tensor cuda_out = c.build(cuda_in);
      CHECK(cuda_out.device() == Device::cuda());
      sum(mul(cuda_out, w.to(Device::cuda()))).backward();
      test::check_close(cuda_out.cpu(), cpu_out, 1e-10, 1e-12);
      for (size_t i = 0; i < cpu_in.size(); ++i) {
        INFO("gradient of input " << i);
        test::check_close(cuda_in[i].grad().cpu(), cpu_in[i].grad(), 1e-10, 1e-12);
      }
      if (!(c.flags & kSingular)) {  // no gradcheck at inf, NaN or a kink
        GradcheckOptions options;
        if (c.flags & kCoarseEps) options.eps = 1e-2;
        TensorList leaves;
        for (const Tensor& x : cuda_in) leaves.push_back(x.detach());
        const GradcheckResult r = gradcheck(c.build, leaves, options);
        INFO(r.report);
        CHECK(r.ok);
      }
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
    }
    g_constants_device = Device::cpu();
  }
}

}  // namespace

TEST_CASE("op table on cuda, cases 0-59: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(0, 60);
}

TEST_CASE("op table on cuda, cases 60-119: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(60, 120);
}

TEST_CASE("op table on cuda, cases 120-139: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(120, 140);
}

// The metric losses (the last cases) are the slowest on the simulator: smaller slices.
TEST_CASE("op table on cuda, cases 140-159: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(140, 160);
}

TEST_CASE("op table on cuda, cases 160-165: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(160, 166);
}

TEST_CASE("op table on cuda, cases 166-172: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(166, 173);
}

TEST_CASE("op table on cuda, cases 173-175: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(173, 176);
}

TEST_CASE("op table on cuda, cases 176-178: match the CPU and pass gradcheck there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(176, 179);
}

// The non-finite and singular cases (kSingular: values and gradients only, no gradcheck).
TEST_CASE("op table on cuda, cases 179-: the non-finite and singular cases match the CPU there", "[ops][table][cuda]") {
  if (!cuda::is_available()) EMBER_SKIP("no cuda device in this build or process");
  check_cases_on_cuda(179, SIZE_MAX);
  CHECK(op_table().size() < 230);  // a longer table gets another test above
}
