#!/usr/bin/env python3
"""PyTorch's side of the rows of apps/bench/bench_kernels_nn.cpp, timed the same way
(torch_timing.py), printed as `name ms` lines.

    /usr/bin/python3 apps/bench/torch_kernels_nn.py [--threads N] [--device cuda]   # Debian's python3-torch

threads defaults to EMBER_NUM_THREADS, else the number of CPUs (ember's default).
"""
import argparse
import os

import torch
import torch.nn.functional as F

from torch_timing import median_ms, use_cuda

def dims(shape):
    return "x".join(str(d) for d in shape)


def backward_ms(x, out, g):
    def step():
        x.grad = None
        out.backward(g, retain_graph=True)
    return median_ms(step)


def bench_unary(rows, op, shape, fn):
    x = torch.randn(*shape)
    with torch.no_grad():
        rows.append((f"{op}_fwd {dims(shape)}", median_ms(lambda: fn(x))))
    xr = x.clone().requires_grad_()
    y = fn(xr)
    rows.append((f"{op}_bwd {dims(shape)}", backward_ms(xr, y, torch.randn(*shape))))


def bench_cross_entropy(rows, n, classes):
    x = torch.randn(n, classes)
    t = torch.randint(0, classes, (n,), device=x.device)
    with torch.no_grad():
        rows.append((f"cross_entropy_fwd {n}x{classes}", median_ms(lambda: F.cross_entropy(x, t))))
    xr = x.clone().requires_grad_()
    loss = F.cross_entropy(xr, t)
    rows.append((f"cross_entropy_bwd {n}x{classes}", backward_ms(xr, loss, torch.ones(()))))


def bench_matmul(rows, n):
    a, b = torch.randn(n, n), torch.randn(n, n)
    with torch.no_grad():
        rows.append((f"matmul {n}x{n}x{n}", median_ms(lambda: torch.matmul(a, b))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=int(os.environ.get("EMBER_NUM_THREADS", os.cpu_count())))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        use_cuda()
    torch.manual_seed(0)
    rows = []
    softmax1 = lambda x: F.softmax(x, 1)  # noqa: E731
    bench_unary(rows, "softmax", (8, 10), softmax1)
    bench_unary(rows, "softmax", (8, 10, 28, 28), softmax1)
    bench_cross_entropy(rows, 32, 10)
    bench_cross_entropy(rows, 256, 1000)
    bench_unary(rows, "relu", (1024, 1024), F.relu)
    bench_unary(rows, "sigmoid", (1024, 1024), torch.sigmoid)
    bench_unary(rows, "tanh", (1024, 1024), torch.tanh)
    bench_matmul(rows, 256)
    bench_matmul(rows, 1024)
    for name, ms in rows:
        print(f"{name} {ms:.4f}")


if __name__ == "__main__":
    main()
