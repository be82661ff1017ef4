#!/usr/bin/python3
"""Writes ops_fixtures.safetensors beside this script: PyTorch's forward values and gradients
for every case of the op table in tests/ops/test_op_table.cpp, the tensor ops and the
neural-network ops (conv2d, pooling, softmax, losses, batch_norm, linear, dropout) and the
metric-learning losses alike.

Run with Debian's python3-torch (1.13):
    /usr/bin/python3 tests/data/make_fixtures.py
The output is deterministic. CI never runs this script; it reads the file.

For each case NAME the file holds (all f32):
    NAME/in0, NAME/in1, ...   the inputs (values drawn here, away from every kink)
    NAME/w                    fixed weights, shaped like the output
    NAME/out                  op(inputs)
    NAME/grad0, ...           d sum(out * w) / d input_i
    NAME/<extra>              what a case's `extras` adds (batch_norm's updated running stats,
                              max_pool2d's indices), read by the tests of those ops
The tensor-op cases run in f32 like the C++ test; the nn cases (NN_CASES) run in f64 on the
f32 inputs, so their reference is exact for the values the C++ test loads.
The case names, input shapes and the op each applies must match the C++ table (the C++ test
checks the shapes and fails on a case that has no fixture).
"""
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

# The metric losses' plain-PyTorch formulas, shared with ember bench losses' peer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "bench"))
import pml_formulas as pml  # noqa: E402

# Constant (non-differentiable) operands, spelled identically in test_op_table.cpp.
COND = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
MASK = torch.tensor([1, 0, 0, 1], dtype=torch.bool)
SELECT_IDX = torch.tensor([2, 0, 2])
ADD_IDX = torch.tensor([0, 2, 0])
GATHER1_IDX = torch.tensor([[0, 3], [1, 1], [2, 0]])
GATHER0_IDX = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
SCATTER_IDX = torch.tensor([[0, 1, 3], [3, 3, 0]])
INF = math.inf


def norm(p, dim=None, keepdim=False):
    return lambda x: torch.linalg.vector_norm(x, p, dim=dim, keepdim=keepdim)


def split_case(x):
    p = torch.split(x, 2, dim=1)
    return torch.cat([p[2], p[0], 2 * p[1]], 1)


def chunk_case(x):
    p = torch.chunk(x, 3, dim=0)
    return p[1] - 2 * p[0]


# name, [(input shape, domain)], op. Domains: "n" = uniform(-2, 2) kept 0.06 away from 0, +-0.5
# and +-1 (the kinks of abs/relu/clamp/maximum in the table); "p" = uniform(0.5, 2).
A = ((3, 4), "n")
P = ((3, 4), "p")
X3 = ((2, 3, 4), "n")
CASES = [
    # ---- unary
    ("neg", [A], lambda x: -x),
    ("abs", [A], torch.abs),
    ("exp", [A], torch.exp),
    ("log", [P], torch.log),
    ("log1p", [P], torch.log1p),
    ("sqrt", [P], torch.sqrt),
    ("rsqrt", [P], torch.rsqrt),
    ("square", [A], torch.square),
    ("relu", [A], torch.relu),
    ("sigmoid", [A], torch.sigmoid),
    ("tanh", [A], torch.tanh),
    ("gelu", [A], F.gelu),
    ("softplus", [A], F.softplus),
    ("exp_expanded", [((1, 4), "n")], lambda x: torch.exp(x.expand(3, 4))),
    ("tanh_rank3", [X3], torch.tanh),
    # ---- binary, with broadcasting
    ("add", [A, A], torch.add),
    ("add_bcast", [((3, 1), "n"), ((1, 4), "n")], torch.add),
    ("add_bcast_rank", [X3, ((4,), "n")], torch.add),
    ("add_scalar", [A], lambda x: x + 2.5),
    ("sub", [A, A], torch.sub),
    ("sub_bcast", [X3, ((3, 1), "n")], torch.sub),
    ("rsub_scalar", [A], lambda x: 1.5 - x),
    ("mul", [A, A], torch.mul),
    ("mul_bcast", [((3, 1), "n"), ((1, 4), "n")], torch.mul),
    ("mul_expanded", [((1, 4), "n"), ((3, 1), "n")], lambda a, b: a.expand(3, 4) * b.expand(3, 4)),
    ("mul_scalar", [A], lambda x: x * -3.0),
    ("div", [A, P], torch.div),
    ("div_bcast", [X3, ((4,), "p")], torch.div),
    ("rdiv_scalar", [P], lambda x: 2.0 / x),
    ("pow", [P, A], torch.pow),
    ("pow_bcast", [P, ((4,), "n")], torch.pow),
    ("pow_scalar", [A], lambda x: x ** 3.0),
    ("pow_half", [P], lambda x: x ** 0.5),
    ("maximum", [A, A], torch.maximum),
    ("maximum_bcast", [A, ((4,), "n")], torch.maximum),
    ("maximum_scalar", [A], lambda x: torch.clamp_min(x, 0.25)),
    ("minimum", [A, A], torch.minimum),
    ("minimum_bcast", [((3, 1), "n"), A], torch.minimum),
    ("clamp", [A], lambda x: torch.clamp(x, -0.5, 1.0)),
    ("clamp_lo", [A], lambda x: torch.clamp(x, min=-0.5)),
    ("clamp_hi", [A], lambda x: torch.clamp(x, max=0.5)),
    ("where", [A, A], lambda a, b: torch.where(COND, a, b)),
    ("where_bcast", [((3, 1), "n"), ((4,), "n")], lambda a, b: torch.where(COND, a, b)),
    ("masked_fill", [A], lambda x: x.masked_fill(MASK, -1.5)),
    # ---- reductions
    ("sum_all", [X3], lambda x: x.sum()),
    ("sum_dims_keep", [X3], lambda x: x.sum((0, 2), keepdim=True)),
    ("sum_last", [X3], lambda x: x.sum(-1)),
    ("sum_middle", [X3], lambda x: x.sum(1)),
    ("mean_all", [X3], lambda x: x.mean()),
    ("mean_dim", [X3], lambda x: x.mean(1)),
    ("var_all", [X3], lambda x: x.var()),
    ("var_dim", [X3], lambda x: x.var(1)),
    ("var_dims_keep", [X3], lambda x: x.var((0, 2), keepdim=True)),
    ("var_biased", [X3], lambda x: x.var(1, unbiased=False)),
    ("stddev_all", [X3], lambda x: x.std()),
    ("stddev_dim", [X3], lambda x: x.std(2)),
    ("amax_dim", [X3], lambda x: x.amax(1)),
    ("amax_all", [X3], lambda x: x.amax()),
    ("amin_dims_keep", [X3], lambda x: x.amin((0, 2), keepdim=True)),
    ("max_dim", [X3], lambda x: torch.max(x, 1).values),
    ("min_dim_keep", [X3], lambda x: torch.min(x, 0, keepdim=True).values),
    ("max_all", [X3], lambda x: x.max()),
    ("logsumexp_dim", [X3], lambda x: torch.logsumexp(x, 1)),
    ("logsumexp_keep", [X3], lambda x: torch.logsumexp(x, (0, 2), keepdim=True)),
    ("norm1", [X3], norm(1, dim=1)),
    ("norm2", [X3], norm(2, dim=1)),
    ("norm2_all", [X3], norm(2)),
    ("norm2_keep", [X3], norm(2, dim=(0, 2), keepdim=True)),
    ("norminf", [X3], norm(INF, dim=2)),
    ("norm3", [X3], norm(3, dim=1)),
    # ---- matmul
    ("matmul_mm", [A, ((4, 5), "n")], torch.matmul),
    ("matmul_mv", [A, ((4,), "n")], torch.matmul),
    ("matmul_vm", [((4,), "n"), ((4, 5), "n")], torch.matmul),
    ("matmul_dot", [((4,), "n"), ((4,), "n")], torch.matmul),
    ("matmul_bmm", [X3, ((2, 4, 5), "n")], torch.matmul),
    ("matmul_bcast_batch", [((2, 1, 3, 4), "n"), ((3, 4, 5), "n")], torch.matmul),
    ("matmul_batched_2d", [X3, ((4, 5), "n")], torch.matmul),
    ("matmul_vec_batched", [((4,), "n"), ((2, 4, 5), "n")], torch.matmul),
    ("matmul_expanded", [((1, 3, 4), "n"), ((2, 4, 5), "n")], lambda a, b: torch.matmul(a.expand(2, 3, 4), b)),
    # ---- shapes and views
    ("reshape", [X3], lambda x: x.reshape(6, 4)),
    ("reshape_infer", [X3], lambda x: x.reshape(4, -1)),
    ("view", [X3], lambda x: x.view(2, 12)),
    ("permute", [X3], lambda x: x.permute(2, 0, 1)),
    ("transpose", [X3], lambda x: x.transpose(0, 2)),
    ("flatten", [X3], lambda x: x.flatten(1)),
    ("squeeze", [((2, 1, 3), "n")], lambda x: x.squeeze()),
    ("squeeze_dim", [((2, 1, 3), "n")], lambda x: x.squeeze(1)),
    ("unsqueeze", [((2, 3), "n")], lambda x: x.unsqueeze(1)),
    ("expand", [((3, 1), "n")], lambda x: x.expand(2, 3, 4)),
    ("narrow", [((3, 5), "n")], lambda x: x.narrow(1, 1, 3)),
    ("slice_step", [((3, 6), "n")], lambda x: x[:, 1:6:2]),
    ("select", [A], lambda x: x.select(1, 2)),
    ("select_neg", [A], lambda x: x.select(0, -1)),
    ("cat", [((2, 3), "n"), ((2, 2), "n")], lambda a, b: torch.cat([a, b], 1)),
    ("cat0", [((2, 3), "n"), ((1, 3), "n")], lambda a, b: torch.cat([a, b], 0)),
    ("stack", [((2, 3), "n"), ((2, 3), "n")], lambda a, b: torch.stack([a, b], 1)),
    ("split", [((3, 5), "n")], split_case),
    ("chunk", [((4, 3), "n")], chunk_case),
    # ---- indexing
    ("index_select", [A], lambda x: torch.index_select(x, 1, SELECT_IDX)),
    ("index_add", [((4, 3), "n"), ((3, 3), "n")], lambda x, s: torch.index_add(x, 0, ADD_IDX, s)),
    ("gather", [A], lambda x: torch.gather(x, 1, GATHER1_IDX)),
    ("gather0", [A], lambda x: torch.gather(x, 0, GATHER0_IDX)),
    ("scatter_add", [A, ((2, 3), "n")], lambda x, s: torch.scatter_add(x, 1, SCATTER_IDX, s)),
    # ---- copies
    ("clone", [A], lambda x: x.clone()),
    ("to_dtype", [A], lambda x: (x.double() * 2).float()),
]


# ---- neural-network ops -------------------------------------------------------------------------
# Constants spelled identically in test_op_table.cpp.
CE_TARGET = torch.tensor([1, 0, 3, -100, 2])
CE_TARGET_4D = torch.tensor([0, 2, 1, -100, 3, 3, 2, 0, 1, 2, 0, 1]).reshape(2, 2, 3)
CE_TARGET_IGNORE1 = torch.tensor([0, 1, 2, 1])
BN_RUNNING_MEAN = [0.1, -0.2, 0.3]
BN_RUNNING_VAR = [0.5, 1.5, 0.8]
ACT = {"none": lambda y: y, "relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def conv(stride=1, padding=0, dilation=1, groups=1, act="none"):
    return lambda x, w, b=None: ACT[act](F.conv2d(x, w, b, stride, padding, dilation, groups))


def linear(act="none"):
    return lambda x, w, b=None: ACT[act](F.linear(x, w, b))


def batch_norm(training, act="none"):
    """ember's batch_norm (momentum 0.1, eps 1e-5) with fresh running stats, then `act`."""
    def op(x, w=None, b=None):
        rm, rv = running_stats(x)
        return ACT[act](F.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5))
    return op


def running_stats(x):
    return (torch.tensor(BN_RUNNING_MEAN, dtype=x.dtype), torch.tensor(BN_RUNNING_VAR, dtype=x.dtype))


def batch_norm_running_stats(x, *affine):
    """The running stats after one training step (tests/ops/test_norm.cpp checks them)."""
    rm, rv = running_stats(x)
    F.batch_norm(x.detach(), rm, rv, None, None, True, 0.1, 1e-5)
    return {"running_mean": rm, "running_var": rv}


def max_pool_indices(kernel, stride, padding):
    """max_pool2d's indices (tests/ops/test_pool.cpp checks them), stored as exact f32."""
    return lambda x: {"indices": F.max_pool2d(x, kernel, stride, padding, return_indices=True)[1].float()}


def philox_block(seed, index):
    """ember's Philox4x32-10 block `index` for `seed` (core/philox.h)."""
    m = 0xFFFFFFFF
    c, k0, k1 = [index & m, index >> 32, 0, 0], seed & m, seed >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & m, (p0 >> 32) ^ c[3] ^ k1, p0 & m]
        k0, k1 = (k0 + 0x9E3779B9) & m, (k1 + 0xBB67AE85) & m
    return c


def dropout(p, seed):
    """ember's dropout with a fresh Generator(seed): element i (row-major) is kept when
    uniform_float(word i % 4 of Philox block i / 4) >= p, and survivors are scaled by 1 / (1 - p)."""
    def op(x):
        words = [philox_block(seed, i // 4)[i % 4] for i in range(x.numel())]
        keep = torch.tensor([bool((w >> 8) * 2.0**-24 >= np.float32(p)) for w in words]).reshape(x.shape)
        return x * keep / (1 - p)
    return op


# ---- metric losses: PML 2.8.1's formulas in plain PyTorch (apps/bench/pml_formulas.py) ------------
# Labels of the metric-loss cases (metric_labels() in test_op_table.cpp).
METRIC_LABELS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
# The given triplets of the mined case (mined_triplets() in test_op_table.cpp): repeats, an
# anchor that is its own positive, a triplet whose labels do not make a triplet.
TRIPLET_ANCHOR = torch.tensor([0, 3, 6, 1, 4, 2, 5, 0, 7])
TRIPLET_POSITIVE = torch.tensor([3, 6, 0, 4, 1, 5, 2, 6, 7])
TRIPLET_NEGATIVE = torch.tensor([1, 2, 7, 0, 5, 3, 1, 4, 0])


def metric(loss, **options):
    """A case op: `loss` of pml_formulas on the case's inputs (embeddings, then W / proxies)
    with METRIC_LABELS."""
    return lambda x, *weights: loss(x, METRIC_LABELS, *weights, **options)


def scale_add_relu(x, scale, residual):
    """ember's scale_add_relu, unfused."""
    return F.relu(x * scale[:, :, None, None] + residual)


NN_CASES = [
    # ---- conv2d (x, w[, b]); the fused activations are applied after the layer here
    ("conv2d", [((2, 2, 5, 4), "n"), ((3, 2, 3, 3), "n"), ((3,), "n")], conv()),
    ("conv2d_stride_pad", [((1, 2, 6, 6), "n"), ((2, 2, 3, 3), "n"), ((2,), "n")], conv(2, 1)),
    ("conv2d_dilation", [((1, 2, 7, 6), "n"), ((2, 2, 3, 2), "n")], conv(1, (2, 1), 2)),
    ("conv2d_groups", [((1, 4, 5, 5), "n"), ((4, 2, 3, 2), "n"), ((4,), "n")], conv((2, 1), (1, 0), 1, 2)),
    ("conv2d_depthwise", [((1, 3, 5, 5), "n"), ((3, 1, 3, 3), "n"), ((3,), "n")], conv(1, 1, 1, 3)),
    ("conv2d_pointwise", [((2, 3, 3, 3), "n"), ((4, 3, 1, 1), "n"), ((4,), "n")], conv()),
    ("conv2d_relu", [((1, 2, 5, 4), "n"), ((3, 2, 3, 3), "n"), ((3,), "n")], conv(1, 1, act="relu")),
    ("conv2d_groups_tanh", [((1, 4, 4, 4), "n"), ((4, 2, 2, 2), "n"), ((4,), "n")], conv(2, 0, 1, 2, "tanh")),
    ("conv2d_depthwise_sigmoid", [((1, 2, 5, 5), "n"), ((2, 1, 3, 3), "n")], conv(1, 1, 2, 2, "sigmoid")),
    # ---- pooling
    ("max_pool2d", [((1, 2, 4, 4), "n")], lambda x: F.max_pool2d(x, 2), max_pool_indices(2, 2, 0)),
    ("max_pool2d_pad", [((1, 2, 5, 5), "n")], lambda x: F.max_pool2d(x, 3, 2, 1), max_pool_indices(3, 2, 1)),
    ("max_pool2d_nonsquare", [((1, 2, 4, 5), "n")], lambda x: F.max_pool2d(x, (2, 3), (1, 2), 1),
     max_pool_indices((2, 3), (1, 2), 1)),
    ("avg_pool2d", [((1, 2, 4, 4), "n")], lambda x: F.avg_pool2d(x, 2)),
    ("avg_pool2d_pad_include", [((1, 2, 5, 5), "n")], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True)),
    ("avg_pool2d_pad_exclude", [((1, 2, 5, 5), "n")], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    ("avg_pool2d_nonsquare", [((1, 2, 5, 6), "n")], lambda x: F.avg_pool2d(x, (3, 2), (1, 2), (1, 0), False, False)),
    ("adaptive_avg_pool2d_global", [((2, 3, 3, 4), "n")], lambda x: F.adaptive_avg_pool2d(x, 1)),
    ("adaptive_avg_pool2d_uneven", [((1, 2, 5, 7), "n")], lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
    ("adaptive_avg_pool2d_upsample", [((1, 2, 3, 2), "n")], lambda x: F.adaptive_avg_pool2d(x, (5, 3))),
    # ---- softmax
    ("softmax_first", [X3], lambda x: torch.softmax(x, 0)),
    ("softmax_mid", [X3], lambda x: torch.softmax(x, 1)),
    ("softmax_last", [X3], lambda x: torch.softmax(x, -1)),
    ("log_softmax_first", [X3], lambda x: torch.log_softmax(x, 0)),
    ("log_softmax_mid", [X3], lambda x: torch.log_softmax(x, 1)),
    ("log_softmax_last", [X3], lambda x: torch.log_softmax(x, -1)),
    # ---- losses (integer targets are constants; -100 is the default ignore_index)
    ("cross_entropy", [((5, 4), "n")], lambda x: F.cross_entropy(x, CE_TARGET)),
    ("cross_entropy_none", [((5, 4), "n")], lambda x: F.cross_entropy(x, CE_TARGET, reduction="none")),
    ("cross_entropy_sum", [((5, 4), "n")], lambda x: F.cross_entropy(x, CE_TARGET, reduction="sum")),
    ("cross_entropy_smooth", [((5, 4), "n")], lambda x: F.cross_entropy(x, CE_TARGET, label_smoothing=0.15)),
    ("cross_entropy_smooth_none", [((5, 4), "n")],
     lambda x: F.cross_entropy(x, CE_TARGET, reduction="none", label_smoothing=0.15)),
    ("cross_entropy_ignore_class", [((4, 3), "n")], lambda x: F.cross_entropy(x, CE_TARGET_IGNORE1, ignore_index=1)),
    ("cross_entropy_4d", [((2, 4, 2, 3), "n")], lambda x: F.cross_entropy(x, CE_TARGET_4D)),
    ("cross_entropy_4d_smooth_none", [((2, 4, 2, 3), "n")],
     lambda x: F.cross_entropy(x, CE_TARGET_4D, reduction="none", label_smoothing=0.1)),
    ("nll_loss", [((5, 4), "n")], lambda x: F.nll_loss(x, CE_TARGET)),
    ("nll_loss_none", [((5, 4), "n")], lambda x: F.nll_loss(x, CE_TARGET, reduction="none")),
    ("nll_loss_4d_sum", [((2, 4, 2, 3), "n")], lambda x: F.nll_loss(x, CE_TARGET_4D, reduction="sum")),
    # ---- batch_norm (x[, weight, bias]), running stats BN_RUNNING_MEAN / BN_RUNNING_VAR
    ("batch_norm_train", [((5, 3), "n"), ((3,), "p"), ((3,), "n")], batch_norm(True), batch_norm_running_stats),
    ("batch_norm_train_4d", [((2, 3, 3, 2), "n"), ((3,), "p"), ((3,), "n")], batch_norm(True),
     batch_norm_running_stats),
    ("batch_norm_train_noaffine", [((4, 3, 2), "n")], batch_norm(True), batch_norm_running_stats),
    ("batch_norm_eval", [((5, 3), "n"), ((3,), "p"), ((3,), "n")], batch_norm(False)),
    ("batch_norm_eval_4d", [((2, 3, 3, 2), "n"), ((3,), "p"), ((3,), "n")], batch_norm(False)),
    ("batch_norm_eval_noaffine", [((2, 3, 2, 2), "n")], batch_norm(False)),
    ("batch_norm_train_relu", [((2, 3, 3, 2), "n"), ((3,), "p"), ((3,), "n")], batch_norm(True, "relu")),
    ("batch_norm_train_sigmoid", [((5, 3), "n"), ((3,), "p"), ((3,), "n")], batch_norm(True, "sigmoid")),
    ("batch_norm_eval_tanh", [((5, 3), "n"), ((3,), "p"), ((3,), "n")], batch_norm(False, "tanh")),
    # ---- linear (x, w[, b])
    ("linear", [A, ((5, 4), "n"), ((5,), "n")], linear()),
    ("linear_1d", [((4,), "n"), ((3, 4), "n"), ((3,), "n")], linear()),
    ("linear_3d_nobias", [X3, ((6, 4), "n")], linear()),
    ("linear_relu", [A, ((5, 4), "n"), ((5,), "n")], linear("relu")),
    ("linear_3d_tanh", [X3, ((5, 4), "n"), ((5,), "n")], linear("tanh")),
    ("linear_sigmoid_nobias", [A, ((2, 4), "n")], linear("sigmoid")),
    # ---- dropout with a fixed generator
    ("dropout", [A], dropout(0.4, 5)),
    ("dropout_rank3", [X3], dropout(0.25, 7)),
    # ---- metric losses (embeddings (8, 5), METRIC_LABELS)
    ("multi_similarity", [((8, 5), "n")], metric(pml.multi_similarity, alpha=2, beta=50, base=0.5)),
    ("multi_similarity_soft", [((8, 5), "n")], metric(pml.multi_similarity, alpha=1, beta=10, base=0.3)),
    ("ntxent", [((8, 5), "n")], metric(pml.ntxent, temperature=0.07)),
    ("ntxent_t05", [((8, 5), "n")], metric(pml.ntxent, temperature=0.5)),
    ("supcon", [((8, 5), "n")], metric(pml.supcon, temperature=0.1)),
    ("supcon_t05", [((8, 5), "n")], metric(pml.supcon, temperature=0.5)),
    ("arcface", [((8, 5), "n"), ((5, 4), "n")], metric(pml.arcface)),
    ("arcface_m40_s3", [((8, 5), "n"), ((5, 4), "n")], metric(pml.arcface, margin_degrees=40, scale=3)),
    ("proxy_anchor", [((8, 5), "n"), ((6, 5), "n")], metric(pml.proxy_anchor)),
    ("proxy_anchor_m02_a4", [((8, 5), "n"), ((6, 5), "n")], metric(pml.proxy_anchor, margin=0.2, alpha=4)),
    ("contrastive", [((8, 5), "n")], metric(pml.contrastive, pos_margin=0.0, neg_margin=1.0)),
    ("contrastive_margins", [((8, 5), "n")], metric(pml.contrastive, pos_margin=0.3, neg_margin=1.2)),
    ("triplet", [((8, 5), "n")], metric(pml.triplet, margin=0.05)),
    ("triplet_m03", [((8, 5), "n")], metric(pml.triplet, margin=0.3)),
    ("triplet_mined", [((8, 5), "n")],
     metric(pml.triplet, margin=0.2, triplets=(TRIPLET_ANCHOR, TRIPLET_POSITIVE, TRIPLET_NEGATIVE))),
    # ---- the fused SE tail relu(x * scale[n, c] + residual) (x, scale, residual)
    ("scale_add_relu", [((2, 3, 2, 3), "n"), ((2, 3), "n"), ((2, 3, 2, 3), "n")], scale_add_relu),
    ("scale_add_relu_5x7", [((1, 2, 5, 7), "n"), ((1, 2), "n"), ((1, 2, 5, 7), "n")], scale_add_relu),
    # ---- conv2d at SE-ResNeXt's kinds of shape: grouped with 2 channels per group and output rows
    # of 16 or more (ember's direct CPU algorithm), 1x1 stride 2
    ("conv2d_groups4_stride2", [((1, 8, 2, 31), "n"), ((8, 2, 3, 3), "n"), ((8,), "n")], conv(2, 1, 1, 4)),
    ("conv2d_groups4_relu", [((1, 8, 2, 16), "n"), ((8, 2, 3, 3), "n")], conv(1, 1, 1, 4, "relu")),
    ("conv2d_pointwise_stride2", [((2, 4, 5, 5), "n"), ((3, 4, 1, 1), "n")], conv(2)),
    ("conv2d_pointwise_groups2", [((1, 4, 3, 4), "n"), ((6, 2, 1, 1), "n"), ((6,), "n")], conv(1, 0, 1, 2)),
]


# ---- non-finite and singular points (issue #12): fixed inputs holding inf, NaN, zeros, ties and
# constant slices, where the values and gradients must be PyTorch's exactly (NaN where it gives
# NaN). The C++ table flags them kSingular: no gradcheck there. A domain may be a list of values
# (row-major); UPSTREAM gives a case fixed weights w (the upstream gradient) instead of drawn ones.
NAN = math.nan
ROWS_NONFINITE = [INF, 1.0, 2.0, -INF, -INF, -INF, INF, -INF, 0.0, NAN, 1.0, 2.0, 1.0, -INF, 3.0]  # (5, 3)
ROWS_NAN_TIES = [1.0, NAN, 3.0, NAN, 2.0, 2.0, 1.0, 0.0, -INF, -INF, -INF, -INF]  # (3, 4)
NORM_ROWS = [0.0, 0.0, 0.0, 1.0, -2.0, 2.0, NAN, 1.0, 0.0, INF, 1.0, -1.0]  # (4, 3)
SINGULAR_CASES = [
    ("logsumexp_nonfinite", [((5, 3), ROWS_NONFINITE)], lambda x: torch.logsumexp(x, 1)),
    ("logsumexp_nonfinite_dim0", [((3, 5), ROWS_NONFINITE)], lambda x: torch.logsumexp(x, 0)),
    ("stddev_constant", [((3, 4), [2.0] * 4 + [1.0, 2.0, 3.0, 4.0] + [-1.0] * 4)], lambda x: x.std(1)),
    ("stddev_constant_all", [((2, 3), [1.5] * 6)], lambda x: x.std()),
    ("var_nonfinite", [((2, 3), [1.0, NAN, 3.0, INF, 2.0, 1.0])], lambda x: x.var(1)),
    ("pow_singular", [((8,), [0.0, 0.0, 0.0, 0.0, 2.0, -1.0, 0.0, -2.0]), ((8,), [0.0, 1.0, -1.0, 0.5, 0.0, 0.5, 2.0, 3.0])],
     torch.pow),
    ("pow_scalar_zero", [((4,), [0.0, 1.0, -2.0, INF])], lambda x: x ** 0.0),
    ("pow_half_zero", [((5,), [0.0, 1.0, 4.0, -1.0, -INF])], lambda x: x ** 0.5),
    ("pow_scalar_nonfinite", [((6,), [-INF, INF, -0.0, 0.0, NAN, -1.0])], lambda x: x ** 1.5),
    ("pow_rsqrt_nonfinite", [((6,), [-INF, INF, -0.0, 0.0, NAN, 4.0])], lambda x: x ** -0.5),
    ("sqrt_zero", [((4,), [0.0, 1.0, 4.0, -1.0])], torch.sqrt),
    ("rsqrt_zero", [((4,), [0.0, 1.0, 4.0, -1.0])], torch.rsqrt),
    ("log_zero", [((4,), [0.0, 1.0, -1.0, INF])], torch.log),
    ("div_zero", [((5,), [0.0, 1.0, -1.0, 0.0, INF]), ((5,), [0.0, 0.0, 0.0, INF, INF])], torch.div),
    ("norm1_singular", [((4, 3), NORM_ROWS)], norm(1, dim=1)),
    ("norm2_singular", [((4, 3), NORM_ROWS)], norm(2, dim=1)),
    ("norm3_singular", [((4, 3), NORM_ROWS)], norm(3, dim=1)),
    ("norminf_singular", [((4, 3), NORM_ROWS)], norm(INF, dim=1)),
    ("norm_p05_singular", [((4, 3), NORM_ROWS)], norm(0.5, dim=1)),
    ("norm_p15_singular", [((4, 3), NORM_ROWS)], norm(1.5, dim=1)),
    ("var_negative_dof", [((2, 2), [1.0, 2.0, 3.0, 3.0])], lambda x: x.var(1, correction=3)),
    ("stddev_zero_dof", [((2, 2), [1.0, 2.0, 3.0, 3.0])], lambda x: x.std(1, correction=2)),
    ("sum_nonfinite", [((5, 3), ROWS_NONFINITE)], lambda x: x.sum(1)),
    ("amax_nan", [((3, 4), ROWS_NAN_TIES)], lambda x: x.amax(1)),
    ("amin_nan_dim0", [((4, 3), ROWS_NAN_TIES)], lambda x: x.amin(0)),
    ("amax_infgrad", [((3, 4), ROWS_NAN_TIES)], lambda x: x.amax(1)),
    ("max_dim_nan", [((3, 4), ROWS_NAN_TIES)], lambda x: torch.max(x, 1).values),
    ("min_dim_nan_keep", [((4, 3), ROWS_NAN_TIES)], lambda x: torch.min(x, 0, keepdim=True).values),
    ("max_all_nan", [((3, 4), ROWS_NAN_TIES)], lambda x: x.max()),
    ("min_all_ties", [((2, 3), [1.0, -2.0, 3.0, -2.0, 0.0, -2.0])], lambda x: x.min()),
    ("maximum_nan", [((6,), [NAN, 1.0, NAN, 2.0, 2.0, -INF]), ((6,), [1.0, NAN, NAN, 2.0, 1.0, -INF])], torch.maximum),
    ("minimum_nan_bcast", [((2, 3), [NAN, 1.0, 2.0, 0.0, NAN, -1.0]), ((3,), [1.0, NAN, 2.0])], torch.minimum),
    ("maximum_infgrad", [((5,), [0.0, 1.0, 2.0, 2.0, NAN]), ((5,), [1.0, 0.0, 2.0, 1.0, 0.0])], torch.maximum),
    ("clamp_nan", [((8,), [NAN, 0.0, 2.0, -1.0, 1.0, -0.5, INF, -INF])], lambda x: torch.clamp(x, -0.5, 1.0)),
    ("maximum_scalar_nan", [((5,), [NAN, 0.25, 2.0, -1.0, INF])], lambda x: torch.clamp_min(x, 0.25)),
    ("minimum_scalar_nan", [((5,), [NAN, 0.25, 2.0, -1.0, -INF])], lambda x: torch.clamp_max(x, 0.25)),
]
UPSTREAM = {
    "amax_infgrad": [INF, NAN, -INF],
    "maximum_infgrad": [INF, -INF, INF, NAN, INF],
    "clamp_nan": [INF, 0.5, INF, NAN, -INF, INF, 1.0, -1.0],
    "maximum_scalar_nan": [INF, -INF, NAN, INF, 1.0],
    "stddev_constant": [INF, 1.0, NAN],
}


def draw(rng, shape, domain):
    n = int(np.prod(shape))
    if isinstance(domain, list):
        assert len(domain) == n, (shape, domain)
        return np.array(domain, dtype=np.float32).reshape(shape)
    if domain == "p":
        values = rng.uniform(0.5, 2.0, n)
    else:
        kinks = np.array([0.0, 0.5, -0.5, 1.0, -1.0])
        values = rng.uniform(-2.0, 2.0, n)
        while True:
            bad = np.abs(values[:, None] - kinks[None, :]).min(axis=1) < 0.06
            if not bad.any():
                break
            values[bad] = rng.uniform(-2.0, 2.0, int(bad.sum()))
    return values.astype(np.float32).reshape(shape)


def main():
    tensors = {}
    cases = [(c, torch.float32) for c in CASES + SINGULAR_CASES] + [(c, torch.float64) for c in NN_CASES]
    for (name, specs, op, *extras), dtype in cases:
        assert "/" not in name and name not in {n.split("/")[0] for n in tensors}, name
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        inputs = [torch.tensor(draw(rng, shape, domain), dtype=dtype, requires_grad=True) for shape, domain in specs]
        out = op(*inputs)
        w = torch.tensor(rng.uniform(-1.0, 1.0, tuple(out.shape)).astype(np.float32), dtype=dtype)
        if name in UPSTREAM:
            w = torch.tensor(UPSTREAM[name], dtype=dtype).reshape(out.shape)
        (out * w).sum().backward()
        for i, x in enumerate(inputs):
            tensors[f"{name}/in{i}"] = x.detach().numpy()
            tensors[f"{name}/grad{i}"] = x.grad.numpy()
        tensors[f"{name}/w"] = w.numpy()
        tensors[f"{name}/out"] = out.detach().numpy()
        for extra in extras:
            for key, value in extra(*inputs).items():
                tensors[f"{name}/{key}"] = value.detach().numpy()

    header, chunks, offset = {"__metadata__": {"written_by": "make_fixtures.py", "torch": torch.__version__}}, [], 0
    for key in sorted(tensors):
        data = np.ascontiguousarray(tensors[key], dtype="<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": list(tensors[key].shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_fixtures.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {len(cases)} cases, {8 + len(text) + offset} bytes")


if __name__ == "__main__":
    main()
