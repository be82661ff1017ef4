#!/usr/bin/env python3
"""Writes cnn_fixtures.safetensors beside this script: PyTorch's conv2d, pooling and linear
outputs and gradients for the cases of tests/ops/test_conv.cpp, test_pool.cpp, test_linear.cpp
and test_fused_activation.cpp.

Regenerate with Debian's PyTorch (CI never runs this):
    /usr/bin/python3 tests/data/make_cnn_fixtures.py

Every case stores its inputs, a fixed upstream gradient `gy`, the output `y` and the gradients
of sum(y * gy) with respect to every input (`dx`, `dw`, `db`), all f32, under "<case>/<name>".
The case table (op and arguments) is the JSON string in the metadata key "cases", so the C++
tests read their arguments from the file instead of repeating this table.
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

CONV = [
    # name, x shape, (Cout, kH, kW), stride, padding, dilation, groups, bias
    ("conv_basic", (2, 3, 7, 6), (4, 3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    ("conv_stride2_pad1", (2, 3, 8, 8), (5, 3, 3), (2, 2), (1, 1), (1, 1), 1, True),
    ("conv_dilation2", (1, 2, 9, 8), (3, 3, 3), (1, 1), (2, 2), (2, 2), 1, False),
    ("conv_groups2", (2, 4, 6, 6), (6, 3, 3), (1, 1), (1, 1), (1, 1), 2, True),
    ("conv_groups4_nonsquare", (2, 8, 7, 9), (8, 2, 3), (2, 1), (1, 0), (1, 1), 4, True),
    ("conv_depthwise", (2, 6, 8, 8), (6, 3, 3), (1, 1), (1, 1), (1, 1), 6, True),
    ("conv_depthwise_multiplier2", (2, 4, 6, 5), (8, 3, 3), (2, 2), (1, 1), (1, 1), 4, False),
    ("conv_pointwise", (3, 5, 5, 4), (7, 1, 1), (1, 1), (0, 0), (1, 1), 1, True),
    ("conv_pointwise_strided", (2, 5, 5, 4), (3, 1, 1), (2, 2), (0, 0), (1, 1), 1, True),
    ("conv_batch1_nonsquare", (1, 3, 5, 9), (2, 3, 5), (1, 2), (0, 2), (2, 1), 1, True),
]
MAX_POOL = [
    # name, x shape, kernel, stride, padding
    ("max_k2", (2, 3, 8, 6), (2, 2), (2, 2), (0, 0)),
    ("max_k3_s2_p1", (2, 2, 9, 7), (3, 3), (2, 2), (1, 1)),
    ("max_nonsquare", (1, 3, 6, 7), (2, 3), (1, 2), (1, 1)),
]
AVG_POOL = [
    # name, x shape, kernel, stride, padding, count_include_pad
    ("avg_k2", (2, 3, 8, 6), (2, 2), (2, 2), (0, 0), True),
    ("avg_k3_s2_p1_include", (2, 2, 9, 7), (3, 3), (2, 2), (1, 1), True),
    ("avg_k3_s2_p1_exclude", (2, 2, 9, 7), (3, 3), (2, 2), (1, 1), False),
    ("avg_nonsquare_exclude", (1, 3, 6, 7), (3, 2), (1, 2), (1, 0), False),
]
ADAPTIVE = [
    # name, x shape, output size
    ("adaptive_global", (2, 4, 7, 5), (1, 1)),
    ("adaptive_3x2", (2, 3, 7, 5), (3, 2)),
    ("adaptive_4x4_uneven", (1, 2, 9, 10), (4, 4)),
    ("adaptive_upsample", (1, 2, 3, 2), (5, 3)),
]
LINEAR = [
    # name, x shape, out features, bias
    ("linear_2d", (5, 7), 3, True),
    ("linear_3d_nobias", (2, 3, 4), 6, False),
]
# Fused bias + activation (ember's conv2d / linear with an Activation): PyTorch applies the
# activation after the layer. Drawn after every case above, so those keep their values.
CONV_ACT = [
    # name, x shape, (Cout, kH, kW), stride, padding, dilation, groups, bias, activation
    ("conv_relu", (2, 3, 7, 6), (4, 3, 3), (1, 1), (1, 1), (1, 1), 1, True, "relu"),
    ("conv_groups2_tanh", (2, 4, 6, 6), (6, 3, 3), (2, 2), (1, 1), (1, 1), 2, True, "tanh"),
    ("conv_depthwise_sigmoid_nobias", (2, 6, 8, 8), (6, 3, 3), (1, 1), (1, 1), (2, 2), 6, False, "sigmoid"),
]
LINEAR_ACT = [
    # name, x shape, out features, bias, activation
    ("linear_relu", (5, 7), 9, True, "relu"),
    ("linear_3d_tanh", (2, 3, 4), 6, True, "tanh"),
    ("linear_sigmoid_nobias", (4, 5), 3, False, "sigmoid"),
]
ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy()


def run(fn, inputs):
    """y = fn(*inputs); returns y, gy and the gradients of sum(y * gy)."""
    leaves = [t.clone().requires_grad_(True) if t is not None else None for t in inputs]
    y = fn(*leaves)
    gy = torch.randn(y.shape, dtype=torch.float64)
    (y * gy).sum().backward()
    return y, gy, [leaf.grad if leaf is not None else None for leaf in leaves]


def main():
    torch.manual_seed(7)
    tensors, cases = {}, []

    def put(case, name, t):
        tensors[f"{case}/{name}"] = f32(t)

    # Inputs are drawn in f64 and rounded to f32 before the reference runs in f64, so the
    # reference is exact for the f32 inputs the C++ test loads.
    def randn(*shape):
        return torch.randn(*shape, dtype=torch.float64).float().double()

    def layer_case(case, fn, x, w, b):
        """A conv2d / linear case: inputs, gy, y and the gradients of x, w and b (if any)."""
        y, gy, (dx, dw, db) = run(fn, [x, w, b])
        for k, v in {"x": x, "w": w, "y": y, "gy": gy, "dx": dx, "dw": dw}.items():
            put(case["name"], k, v)
        if b is not None:
            put(case["name"], "b", b)
            put(case["name"], "db", db)
        cases.append(case)

    def conv_case(name, xs, cout, kh, kw, stride, padding, dilation, groups, bias, act=None):
        x, w = randn(*xs), randn(cout, xs[1] // groups, kh, kw)
        b = randn(cout) if bias else None
        case = {"name": name, "op": "conv2d_act" if act else "conv2d", "stride": stride, "padding": padding,
                "dilation": dilation, "groups": groups, "bias": bias}
        if act:
            case["activation"] = act
        activation = ACTIVATIONS[act] if act else (lambda y: y)
        layer_case(case, lambda x, w, b: activation(F.conv2d(x, w, b, stride, padding, dilation, groups)), x, w, b)

    def linear_case(name, xs, out, bias, act=None):
        x, w = randn(*xs), randn(out, xs[-1])
        b = randn(out) if bias else None
        case = {"name": name, "op": "linear_act" if act else "linear", "bias": bias}
        if act:
            case["activation"] = act
        activation = ACTIVATIONS[act] if act else (lambda y: y)
        layer_case(case, lambda x, w, b: activation(F.linear(x, w, b)), x, w, b)

    for name, xs, (cout, kh, kw), stride, padding, dilation, groups, bias in CONV:
        conv_case(name, xs, cout, kh, kw, stride, padding, dilation, groups, bias)
    for name, xs, kernel, stride, padding in MAX_POOL:
        x = randn(*xs)
        y, gy, (dx,) = run(lambda x: F.max_pool2d(x, kernel, stride, padding), [x])
        _, indices = F.max_pool2d(x, kernel, stride, padding, return_indices=True)
        for k, v in {"x": x, "y": y, "gy": gy, "dx": dx}.items():
            put(name, k, v)
        tensors[f"{name}/indices"] = indices.numpy().astype(np.int64)
        cases.append({"name": name, "op": "max_pool2d", "kernel": kernel, "stride": stride, "padding": padding})
    for name, xs, kernel, stride, padding, include in AVG_POOL:
        x = randn(*xs)
        y, gy, (dx,) = run(lambda x: F.avg_pool2d(x, kernel, stride, padding, count_include_pad=include), [x])
        for k, v in {"x": x, "y": y, "gy": gy, "dx": dx}.items():
            put(name, k, v)
        cases.append({"name": name, "op": "avg_pool2d", "kernel": kernel, "stride": stride, "padding": padding,
                      "count_include_pad": include})
    for name, xs, size in ADAPTIVE:
        x = randn(*xs)
        y, gy, (dx,) = run(lambda x: F.adaptive_avg_pool2d(x, size), [x])
        for k, v in {"x": x, "y": y, "gy": gy, "dx": dx}.items():
            put(name, k, v)
        cases.append({"name": name, "op": "adaptive_avg_pool2d", "output_size": size})
    for name, xs, out, bias in LINEAR:
        linear_case(name, xs, out, bias)
    for name, xs, (cout, kh, kw), stride, padding, dilation, groups, bias, act in CONV_ACT:
        conv_case(name, xs, cout, kh, kw, stride, padding, dilation, groups, bias, act)
    for name, xs, out, bias, act in LINEAR_ACT:
        linear_case(name, xs, out, bias, act)

    metadata = {"written_by": "make_cnn_fixtures.py", "torch": torch.__version__,
                "cases": json.dumps(cases, separators=(",", ":"))}
    write_safetensors(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cnn_fixtures.safetensors"),
                      tensors, metadata)


def write_safetensors(path, tensors, metadata):
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {8 + len(text) + offset} bytes, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
