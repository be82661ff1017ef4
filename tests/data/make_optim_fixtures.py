#!/usr/bin/env python3
"""Writes optim_fixtures.safetensors: torch.optim's results for ember's optimizer tests
(tests/nn/test_optim.cpp). Needs PyTorch; run with Debian's python3-torch:
    /usr/bin/python3 tests/data/make_optim_fixtures.py
The output is deterministic (no random numbers are drawn).

Contents (all f32):
  init.p0 (3, 4), init.p1 (4)            the starting parameters
  grad.<k>.p0, grad.<k>.p1               the gradient given before step k (k = 1..STEPS)
  <config>.<k>.p0, <config>.<k>.p1       the parameters after step k of optimizer <config>
CONFIGS below lists every configuration; the C++ test repeats the same table.
"""
import json
import os
import struct

import numpy as np
import torch

STEPS = 3


def configs(p0, p1):
    SGD, Adam, AdamW = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW
    both = [p0, p1]
    return {
        "sgd": lambda: SGD(both, lr=0.1),
        "sgd_momentum": lambda: SGD(both, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
        "sgd_nesterov": lambda: SGD(both, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
        "sgd_groups": lambda: SGD([{"params": [p0], "weight_decay": 0.01},
                                   {"params": [p1], "lr": 0.2}], lr=0.1, momentum=0.9),
        "adam": lambda: Adam(both, lr=0.01),
        "adam_wd_amsgrad": lambda: Adam(both, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=True),
        "adamw": lambda: AdamW(both, lr=0.01, weight_decay=0.05),
        "adamw_amsgrad": lambda: AdamW(both, lr=0.02, betas=(0.85, 0.995), weight_decay=0.1, amsgrad=True),
    }


def initial():
    p0 = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.37).sin()
    p1 = torch.tensor([0.5, -1.25, 2.0, 0.0])
    return p0, p1


def grad(k, shape, salt):
    n = int(np.prod(shape))
    x = torch.arange(n, dtype=torch.float32) * (0.7 + 0.3 * k) + salt
    # Mixed signs and magnitudes over three decades, so bias correction and amsgrad matter.
    return (x.cos() * (10.0 ** ((torch.arange(n) % 3) - 1).float())).reshape(shape)


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = {"written_by": "make_optim_fixtures.py", "torch": torch.__version__}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def main():
    out = {}
    p0, p1 = initial()
    out["init.p0"], out["init.p1"] = p0.numpy(), p1.numpy()
    for k in range(1, STEPS + 1):
        out[f"grad.{k}.p0"] = grad(k, (3, 4), 0.0).numpy()
        out[f"grad.{k}.p1"] = grad(k, (4,), 1.5).numpy()
    p0, p1 = (t.clone().requires_grad_() for t in initial())
    names = list(configs(p0, p1))
    for name in names:
        p0, p1 = (t.clone().requires_grad_() for t in initial())
        opt = configs(p0, p1)[name]()
        for k in range(1, STEPS + 1):
            p0.grad = torch.from_numpy(out[f"grad.{k}.p0"]).clone()
            p1.grad = torch.from_numpy(out[f"grad.{k}.p1"]).clone()
            opt.step()
            out[f"{name}.{k}.p0"] = p0.detach().numpy().copy()
            out[f"{name}.{k}.p1"] = p1.detach().numpy().copy()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_fixtures.safetensors")
    write_safetensors(path, out)
    print(f"wrote {path}: {len(out)} tensors")


if __name__ == "__main__":
    main()
