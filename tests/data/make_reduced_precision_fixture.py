#!/usr/bin/python3
"""Writes reduced_precision_fixtures.safetensors beside this script: PyTorch's own bf16 and f16
results for the ops ember computes in f32 and rounds once (tests/ops/test_reduced_precision_fixture.cpp).

Run with Debian's python3-torch (1.13):
    /usr/bin/python3 tests/data/make_reduced_precision_fixture.py
The output is deterministic. CI never runs this script; it reads the file.

For each dtype D in {bf16, f16} and case NAME the file holds, stored as BF16 / F16 (I64 for
class targets):
    D/NAME/in0, D/NAME/in1, ...   the inputs, drawn in f32 and rounded to D
    D/NAME/out                    PyTorch's result of the op on D tensors
A case PyTorch 1.13 does not implement for D on the CPU (its f16 GEMMs, for example) is left
out; the C++ test runs every case the file has and requires the bf16 GEMM cases to be there.
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(0)

DTYPES = {"bf16": (torch.bfloat16, "BF16"), "f16": (torch.float16, "F16")}


def away_from_zero(x):
    return x.abs() + 0.25


def cases():
    """name -> (list of f32 inputs, function of the rounded inputs)."""
    g = torch.Generator().manual_seed(1)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    target = torch.tensor([0, 3, 1, 4, 2, 0, 1, 3])
    return {
        "exp": ([randn(6, 33)], lambda a: torch.exp(a)),
        "log": ([away_from_zero(randn(6, 33))], lambda a: torch.log(a)),
        "sqrt": ([away_from_zero(randn(6, 33))], lambda a: torch.sqrt(a)),
        "tanh": ([randn(6, 33)], lambda a: torch.tanh(a)),
        "sigmoid": ([randn(6, 33)], lambda a: torch.sigmoid(a)),
        "gelu": ([randn(6, 33)], lambda a: F.gelu(a)),
        "relu": ([randn(6, 33)], lambda a: F.relu(a)),
        "add": ([randn(6, 33), randn(33)], lambda a, b: a + b),
        "mul": ([randn(6, 33), randn(6, 33)], lambda a, b: a * b),
        "div": ([randn(6, 33), away_from_zero(randn(6, 33))], lambda a, b: a / b),
        "sum": ([randn(5, 300)], lambda a: a.sum(1)),
        "mean": ([randn(5, 300)], lambda a: a.mean(0)),
        "softmax": ([randn(8, 5)], lambda a: F.softmax(a, 1)),
        "log_softmax": ([randn(8, 5)], lambda a: F.log_softmax(a, 1)),
        "cross_entropy": ([randn(8, 5)], lambda a: F.cross_entropy(a, target)),
        "max_pool2d": ([randn(2, 3, 6, 6)], lambda a: F.max_pool2d(a, 2)),
        "avg_pool2d": ([randn(2, 3, 6, 6)], lambda a: F.avg_pool2d(a, 3)),
        "batch_norm": ([randn(4, 3, 5, 5)], lambda a: F.batch_norm(a, None, None, training=True)),
        # Note: PyTorch 1.13's CPU bf16 matmul (its at::native gemm fallback) accumulates in bf16:
        # at K = 40 its largest error against the exact product of the rounded operands is 0.16,
        # against 0.024 with f32 accumulation. PyTorch's own AMP GEMMs (oneDNN, cuBLAS) and ember
        # accumulate in f32, so this case records that: the f32 product, rounded once.
        "matmul": ([randn(7, 40), randn(40, 5)], lambda a, b: (a.float() @ b.float()).to(a.dtype)),
        "conv2d": ([randn(2, 3, 8, 8), randn(4, 3, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1)),
    }


def encode(t, code):
    """A tensor as (safetensors dtype, little-endian bytes)."""
    if code == "BF16":
        bits = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2")
        return code, bits.tobytes()
    if code == "F16":
        return code, t.to(torch.float16).numpy().astype("<f2").tobytes()
    return "I64", t.numpy().astype("<i8").tobytes()


def main():
    entries = {}
    skipped = []
    for dname, (dtype, code) in DTYPES.items():
        for name, (inputs, fn) in cases().items():
            rounded = [x.to(dtype) for x in inputs]
            try:
                out = fn(*rounded)
            except RuntimeError as e:  # not implemented for this dtype on the CPU
                skipped.append(f"{dname}/{name}: {str(e).splitlines()[0]}")
                continue
            assert out.dtype == dtype, (dname, name, out.dtype)
            for k, x in enumerate(rounded):
                entries[f"{dname}/{name}/in{k}"] = (x, code)
            entries[f"{dname}/{name}/out"] = (out, code)
    entries["target"] = (torch.tensor([0, 3, 1, 4, 2, 0, 1, 3]), "I64")

    header, chunks, offset = {"__metadata__": {"torch": torch.__version__}}, [], 0
    for name in sorted(entries, key=lambda n: (entries[n][1] != "I64", n)):  # 8-byte entries first
        t, code = entries[name]
        st, data = encode(t.contiguous(), code)
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reduced_precision_fixtures.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {8 + len(text) + offset} bytes")
    for s in skipped:
        print("skipped", s)


if __name__ == "__main__":
    main()
