#!/usr/bin/env python3
"""Writes nn_fixtures.safetensors beside this script: PyTorch's values for ember's nn ops.

Regenerate with Debian's PyTorch (python3-torch 1.13, not a pyenv python):
    /usr/bin/python3 tests/data/make_nn_fixtures.py
Read by tests/ops/test_norm.cpp, test_softmax.cpp and tests/losses/test_cross_entropy.cpp.
Everything is float64 so the tests can compare f64 results tightly (and f32 ones loosely).
For each case the inputs, an upstream gradient `grad` (random weights for a scalar loss
sum(out * grad)), the outputs and the input gradients are stored under "<case>.<name>".
"""
import json
import os
import struct

import numpy as np
import torch

torch.manual_seed(0)
F = torch.nn.functional
OUT = {}


def put(case, **tensors):
    for name, t in tensors.items():
        OUT[f"{case}.{name}"] = t.detach().numpy() if isinstance(t, torch.Tensor) else t


def rand(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_()


ACTIVATIONS = {None: lambda y: y, "relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def batch_norm_case(case, shape, act=None):
    """act: ember's fused activation, applied after batch_norm here."""
    c = shape[1]
    x = rand(*shape, scale=2.0)
    x.data += 3.0  # a mean away from zero
    w, b = rand(c), rand(c)
    rm0 = torch.randn(c, dtype=torch.float64)
    rv0 = torch.rand(c, dtype=torch.float64) + 0.5
    grad = torch.randn(*shape, dtype=torch.float64)
    put(case, x=x, weight=w, bias=b, running_mean=rm0, running_var=rv0, grad=grad)
    for mode, training in (("train", True), ("eval", False)):
        rm, rv = rm0.clone(), rv0.clone()
        y = ACTIVATIONS[act](F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5))
        dx, dw, db = torch.autograd.grad((y * grad).sum(), (x, w, b))
        put(f"{case}.{mode}", y=y, dx=dx, dweight=dw, dbias=db, running_mean=rm, running_var=rv)


def softmax_case(case, shape, dim):
    x = rand(*shape, scale=3.0)
    grad = torch.randn(*shape, dtype=torch.float64)
    put(case, x=x, grad=grad, dim=np.array(dim, dtype=np.int64))
    for name, fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
        y = fn(x, dim)
        (dx,) = torch.autograd.grad((y * grad).sum(), (x,))
        put(f"{case}.{name}", y=y, dx=dx)


def cross_entropy_case(case, logits_shape, target, smoothing, ignore_index=-100):
    x = rand(*logits_shape, scale=2.0)
    t = torch.tensor(target, dtype=torch.int64)
    put(case, logits=x, target=t, smoothing=np.array(smoothing), ignore_index=np.array(ignore_index))
    for red in ("none", "mean", "sum"):
        loss = F.cross_entropy(x, t, reduction=red, label_smoothing=smoothing, ignore_index=ignore_index)
        grad = torch.randn(loss.shape, dtype=torch.float64)
        (dx,) = torch.autograd.grad((loss * grad).sum(), (x,))
        put(f"{case}.{red}", loss=loss, grad=grad, dx=dx)
    if smoothing == 0:
        logp = F.log_softmax(x, 1).detach().requires_grad_()
        loss = F.nll_loss(logp, t, ignore_index=ignore_index)
        (dlogp,) = torch.autograd.grad(loss, (logp,))
        put(f"{case}.nll", log_probs=logp, loss=loss, dlog_probs=dlogp)


batch_norm_case("bn2d", (6, 4))
batch_norm_case("bn4d", (3, 4, 5, 5))
softmax_case("sm_last", (3, 5, 7), 2)
softmax_case("sm_mid", (3, 5, 7), 1)
softmax_case("sm_first", (4, 6), 0)
cross_entropy_case("ce", (6, 5), [0, 4, 2, -100, 1, 3], 0.0)
cross_entropy_case("ce_smooth", (6, 5), [0, 4, 2, -100, 1, 3], 0.1)
cross_entropy_case("ce_4d", (2, 4, 3, 3), [[[0, 1, 2], [3, 3, 0], [1, -100, 2]], [[2, 2, 1], [0, 3, 3], [1, 0, 2]]], 0.2)
# Fused batch norm + activation; drawn last, so the cases above keep their values.
batch_norm_case("bn2d_tanh", (6, 4), "tanh")
batch_norm_case("bn4d_relu", (3, 4, 5, 5), "relu")
batch_norm_case("bn4d_sigmoid", (2, 3, 4, 4), "sigmoid")

DTYPES = {np.dtype(np.float64): "F64", np.dtype(np.int64): "I64"}


def main():
    header, chunks, offset = {"__metadata__": {"written_by": "make_nn_fixtures.py", "torch": torch.__version__}}, [], 0
    for name in sorted(OUT):
        a = np.asarray(OUT[name])  # (np.ascontiguousarray would make 0-d arrays 1-d)
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_fixtures.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {8 + len(text) + offset} bytes, {len(OUT)} tensors")


if __name__ == "__main__":
    main()
