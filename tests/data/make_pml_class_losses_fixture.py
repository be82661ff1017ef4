#!/usr/bin/python3
"""Writes pml_class_losses.safetensors beside this script: class-weight losses whose weights
are stored as pytorch-metric-learning 2.8.1 stores them, for ember's load_state_dict test
(tests/losses/test_arcface.cpp, tests/losses/test_proxy_anchor.cpp).

Run with Debian's python3-torch (1.13); there is no PML package, so the modules below hold
their parameters exactly as PML's do (same names, shapes and default init):
    ArcFaceLoss.W         (embedding_size, num_classes), torch.nn.init.normal_
    ProxyAnchorLoss.proxies (num_classes, embedding_size), kaiming_normal_(mode="fan_out")
and their losses are PML's formulas written plainly in PyTorch (apps/bench/pml_formulas.py). Each module is trained for a
few SGD steps (so the weights are not just their init), then saved:
    /usr/bin/python3 tests/data/make_pml_class_losses_fixture.py
The output is deterministic. For each loss NAME (arcface, proxy_anchor) the file holds:
    NAME/state/<param>   the module's state_dict() (f32), as PML would save it
    NAME/embeddings      (B, D) f32 evaluation embeddings; NAME/labels (B) i64
    NAME/loss            the loss of those (f32 scalar) under the trained weights, in f32
    NAME/loss_f64        the same in f64 on the same f32 values
ArcFace's evaluation batch has a row whose target angle is beyond pi - margin.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# PML's formulas in plain PyTorch, shared with the op table's fixtures and the benchmark peer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "bench"))
from pml_formulas import arcface as arcface_formula  # noqa: E402
from pml_formulas import proxy_anchor as proxy_anchor_formula  # noqa: E402

NUM_CLASSES, EMBEDDING_SIZE, BATCH = 5, 6, 12


class ArcFace(torch.nn.Module):
    """ArcFaceLoss(num_classes, embedding_size, margin=28.6, scale=64)."""

    def __init__(self, num_classes, embedding_size, margin=28.6, scale=64):
        super().__init__()
        self.margin_degrees, self.scale = margin, scale
        self.margin = np.radians(margin)
        self.W = torch.nn.Parameter(torch.Tensor(embedding_size, num_classes))
        torch.nn.init.normal_(self.W)

    def forward(self, emb, labels):
        return arcface_formula(emb, labels, self.W.to(emb.dtype), self.margin_degrees, self.scale)


class ProxyAnchor(torch.nn.Module):
    """ProxyAnchorLoss(num_classes, embedding_size, margin=0.1, alpha=32)."""

    def __init__(self, num_classes, embedding_size, margin=0.1, alpha=32):
        super().__init__()
        self.margin, self.alpha = margin, alpha
        self.proxies = torch.nn.Parameter(torch.Tensor(num_classes, embedding_size))
        torch.nn.init.kaiming_normal_(self.proxies, mode="fan_out")

    def forward(self, emb, labels):
        return proxy_anchor_formula(emb, labels, self.proxies.to(emb.dtype), self.margin, self.alpha)


def train(module, steps=5):
    opt = torch.optim.SGD(module.parameters(), lr=0.05)
    for _ in range(steps):
        emb = torch.randn(BATCH, EMBEDDING_SIZE)
        labels = torch.randint(0, NUM_CLASSES, (BATCH,))
        opt.zero_grad()
        module(emb, labels).backward()
        opt.step()


def main():
    torch.manual_seed(10)
    tensors = {}
    labels = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 0, 3, 1, 4])
    for name, module in [("arcface", ArcFace(NUM_CLASSES, EMBEDDING_SIZE)),
                         ("proxy_anchor", ProxyAnchor(NUM_CLASSES, EMBEDDING_SIZE))]:
        train(module)
        emb = torch.randn(BATCH, EMBEDDING_SIZE)
        if name == "arcface":
            # Row 0 points away from its class's weight: its target angle is beyond pi - margin.
            w0 = module.W.detach()[:, 0]
            emb[0] = -w0 / w0.norm() * 2 + 0.05 * torch.randn(EMBEDDING_SIZE)
            with torch.no_grad():
                w = F.normalize(module.W.t(), dim=1)
                angle = torch.acos(F.normalize(emb[:1], dim=1) @ w[0])
            assert angle.item() > math.pi - module.margin, angle
        for key, value in module.state_dict().items():
            tensors[f"{name}/state/{key}"] = value.numpy()
        with torch.no_grad():
            tensors[f"{name}/embeddings"] = emb.numpy()
            tensors[f"{name}/labels"] = labels.numpy()
            tensors[f"{name}/loss"] = module(emb, labels).numpy()
            tensors[f"{name}/loss_f64"] = module(emb.double(), labels).numpy()

    codes = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}
    header = {"__metadata__": {"written_by": "make_pml_class_losses_fixture.py", "torch": torch.__version__}}
    chunks, offset = [], 0
    for key in sorted(tensors):
        array = np.asarray(tensors[key])  # 0-d stays 0-d (np.ascontiguousarray would make it 1-d)
        data = array.astype(array.dtype.newbyteorder("<")).tobytes(order="C")
        header[key] = {"dtype": codes[array.dtype], "shape": list(array.shape),
                       "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pml_class_losses.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {len(tensors)} tensors, {8 + len(text) + offset} bytes")


if __name__ == "__main__":
    main()
