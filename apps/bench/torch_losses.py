#!/usr/bin/env python3
"""PyTorch's side of `ember bench losses` (apps/bench/bench_losses.cpp): the metric losses written
plainly in PyTorch, eager, the way pytorch-metric-learning 2.8.1 computes them (pml_formulas.py:
whole B x B similarity matrices and masks), timed like ember's rows (torch_timing.py), printed as
`name ms` lines; or, with --capacity, the largest batch whose forward+backward fits a memory
budget, each batch size measured in a fresh process by its peak resident memory above its
baseline, printed as `capacity name batch` lines.

    /usr/bin/python3 apps/bench/torch_losses.py [--threads N] [--device cuda]
    /usr/bin/python3 apps/bench/torch_losses.py --capacity --budget-mib 256 --time-cap-s 5
"""
import argparse
import math
import os
import resource
import subprocess
import sys
import time

import torch

import pml_formulas as pml
from torch_timing import median_ms, use_cuda

# (name, batch, dim, per class, classes): the profiles of bench_losses.cpp.
PROFILES = [("standard", 512, 128, 4, 1024), ("large", 512, 512, 16, 10000)]


def class_weights(shape, std):
    """A (rows, cols) parameter drawn from N(0, std^2), as PML initialises W and the proxies."""
    return (torch.randn(*shape) * std).requires_grad_()


class ClassLoss:
    """A loss with one weight per class: W (D, C) for ArcFace, proxies (C, D) for ProxyAnchor."""
    def __init__(self, formula, weights):
        self.formula, self.weights = formula, weights

    def __call__(self, emb, labels):
        return self.formula(emb, labels, self.weights)

    def parameters(self):
        return [self.weights]


# name -> (uses classes, make(classes, dim) -> loss(emb, labels)); the names of apps/train/metric_losses.cpp.
LOSSES = {
    "ntxent": (False, lambda classes, dim: pml.ntxent),
    "supcon": (False, lambda classes, dim: pml.supcon),
    "contrastive": (False, lambda classes, dim: pml.contrastive),
    "triplet": (False, lambda classes, dim: pml.triplet),
    "batch-hard": (False, lambda classes, dim: lambda e, y: pml.triplet(e, y, triplets=pml.batch_hard_triplets(e, y))),
    "multisim": (False, lambda classes, dim: pml.multi_similarity),
    "arcface": (True, lambda classes, dim: ClassLoss(pml.arcface, class_weights((dim, classes), 1.0))),
    "proxyanchor": (True, lambda classes, dim: ClassLoss(pml.proxy_anchor,
                                                         class_weights((classes, dim), math.sqrt(2.0 / classes)))),
}


DTYPE = torch.float32  # --precision bf16: the embeddings in bfloat16, as PML's BF16 table


def inputs(batch, dim, per_class, classes, class_loss):
    gen = torch.Generator().manual_seed(1234)
    emb = torch.randn(batch, dim, generator=gen).to(torch.zeros(0).device).to(DTYPE).requires_grad_()
    i = torch.arange(batch)
    labels = (i % classes if class_loss else i // per_class).to(emb.device)
    return emb, labels


def step(loss, emb, labels, params):
    emb.grad = None
    for q in params:
        q.grad = None
    loss(emb, labels).backward()


def make(name, classes, dim):
    uses_classes, factory = LOSSES[name]
    loss = factory(classes, dim)
    return uses_classes, loss, list(getattr(loss, "parameters", lambda: [])())


def time_rows(losses, profiles):
    for profile, batch, dim, per_class, classes in PROFILES:
        if profile not in profiles:
            continue
        for name in losses:
            uses_classes, loss, params = make(name, classes, dim)
            emb, labels = inputs(batch, dim, per_class, classes, uses_classes)
            print(f"{name} {profile} {median_ms(lambda: step(loss, emb, labels, params)):.6f}", flush=True)


def one_step(name, batch, cuda):
    """Runs one forward+backward at `batch` (standard profile); prints the peak MiB above what
    was in use before it (the GPU allocator's on cuda, the resident set's on the CPU) and seconds."""
    _, _, dim, per_class, classes = PROFILES[0]
    uses_classes, loss, params = make(name, classes, dim)
    emb, labels = inputs(batch, dim, per_class, classes, uses_classes)
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    step(loss, emb, labels, params)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print((peak - base) / 2**20, seconds)


def capacity(args):
    for name in args.losses:
        best = 0
        batch = PROFILES[0][1]
        while batch <= args.max_batch:
            run = subprocess.run([sys.executable, __file__, "--one-step", name, "--batch", str(batch),
                                  "--threads", str(args.threads), "--device", args.device,
                                  "--precision", args.precision],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                break
            mib, seconds = map(float, run.stdout.split())
            if mib > args.budget_mib or seconds > args.time_cap_s:
                break
            best = batch
            batch *= 2
        print(f"capacity {name} {best}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=int(os.environ.get("EMBER_NUM_THREADS", os.cpu_count())))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--capacity", action="store_true")
    parser.add_argument("--budget-mib", type=float, default=256)
    parser.add_argument("--time-cap-s", type=float, default=5)
    parser.add_argument("--max-batch", type=int, default=65536)
    parser.add_argument("--one-step")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--losses", type=lambda s: s.split(","), default=list(LOSSES), help="comma-separated")
    parser.add_argument("--profiles", type=lambda s: s.split(","), default=[p[0] for p in PROFILES])
    args = parser.parse_args()
    global DTYPE
    DTYPE = torch.bfloat16 if args.precision == "bf16" else torch.float32
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        use_cuda()
    if args.one_step:
        one_step(args.one_step, args.batch, args.device == "cuda")
    elif args.capacity:
        capacity(args)
    else:
        time_rows(args.losses, args.profiles)


if __name__ == "__main__":
    main()
