#!/usr/bin/env python3
"""PyTorch's side of `ember bench seresnext` (apps/bench/bench_seresnext.cpp): the ResNet family
as NVIDIA DeepLearningExamples builds it (PyTorch/Classification/ConvNets), written here in plain
PyTorch, measured by NVIDIA's protocol on synthetic data and printed as `name value` lines.

    /usr/bin/python3 apps/bench/torch_seresnext.py --threads 2 --layers 3,4,6,3 \
        --widths 128,256,512,1024 --expansion 2 --groups 32 --se-squeeze 16 --stem imagenet \
        --image-size 224 train --batch 8 --warmup 2 --iters 5
      -> train_img_s 7.1 / train_peak_mib 1830.2
    /usr/bin/python3 apps/bench/torch_seresnext.py ... infer --batches 1,2,4 --warmup 3 --iters 20
      -> infer 1 avg_ms ... / infer 1 p95_ms ... / infer 1 p99_ms ... / infer 1 img_s ...

The architecture comes as flags (the caller passes ember's config, so both sides build the same
network): stem `imagenet` is conv 7x7/2 3->64, BN, ReLU, max pool 3x3/2 pad 1; stem `cifar` is
conv 3x3/1 3->64, BN, ReLU, no max pool (--stem-channels sets the 64). Each bottleneck is 1x1 -> BN -> ReLU -> 3x3
grouped (stride here) -> BN -> ReLU -> 1x1 -> BN -> [SE] -> + residual -> ReLU, the first block of
a stage downsampling with a strided 1x1 conv + BN; SE is global average -> Linear(C, squeeze) ->
ReLU -> Linear(squeeze, C) -> sigmoid, multiplied in before the residual.

Peak memory: the growth of the process's peak resident set over its value after the model and
the batch were built (ru_maxrss), i.e. what the steps themselves needed: activations, gradients,
optimizer state and allocator slack. With --device cuda everything runs on the GPU (cuDNN in
benchmark mode, CUDA autocast), timed stretches end with a synchronisation, and the peak is
torch.cuda.max_memory_allocated above what was allocated before the steps.
"""
import argparse
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.squeeze = nn.Linear(channels, squeeze)
        self.expand = nn.Linear(squeeze, channels)

    def forward(self, x):
        s = x.mean((2, 3))
        s = torch.sigmoid(self.expand(F.relu(self.squeeze(s))))
        return s[:, :, None, None]


class Bottleneck(nn.Module):
    def __init__(self, inplanes, width, expansion, groups, stride, se_squeeze):
        super().__init__()
        out = width * expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.se = SqueezeExcitation(out, se_squeeze) if se_squeeze > 0 else None
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.se is not None:
            y = y * self.se(y)
        return F.relu(y + residual)


def stem(kind, channels):
    if kind == "imagenet":
        return nn.Sequential(nn.Conv2d(3, channels, 7, 2, 3, bias=False), nn.BatchNorm2d(channels), nn.ReLU(),
                             nn.MaxPool2d(3, 2, 1))
    return nn.Sequential(nn.Conv2d(3, channels, 3, 1, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU())


class ResNet(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.stem = stem(a.stem, a.stem_channels)
        blocks, inplanes = [], a.stem_channels
        for stage, (count, width) in enumerate(zip(a.layers, a.widths)):
            for i in range(count):
                stride = 2 if (i == 0 and stage > 0) else 1
                blocks.append(Bottleneck(inplanes, width, a.expansion, a.groups, stride, a.se_squeeze))
                inplanes = width * a.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(inplanes, a.classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def ints(text):
    return [int(v) for v in text.split(",") if v]


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synchronize(a):
    """Waits for the GPU's queued work; nothing on the CPU."""
    if a.device == "cuda":
        torch.cuda.synchronize()


def train(model, a):
    """Training img/s over a.iters SGD steps after a.warmup, on one synthetic batch."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=gen).to(a.device)
    y = torch.randint(0, a.classes, (a.batch,), generator=gen).to(a.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.875, weight_decay=6.103515625e-05)
    model.train()
    synchronize(a)
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    else:
        base = peak_rss_mib()

    low = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]

    def step():
        opt.zero_grad(set_to_none=True)
        # PyTorch AMP: the forward under autocast, backward and step outside it.
        with torch.autocast(a.device, dtype=low or torch.bfloat16, enabled=low is not None):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    synchronize(a)
    start = time.perf_counter()
    for _ in range(a.iters):
        step()
    synchronize(a)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if a.device == "cuda" else peak_rss_mib()
    print(f"train_img_s {a.batch * a.iters / seconds:.6f}")
    print(f"train_peak_mib {peak - base:.3f}")


def infer(model, a):
    """Latency avg / p95 / p99 (ms) and img/s per batch size, eval mode, no autograd."""
    model.eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for batch in ints(a.batches):
            x = torch.randn(batch, 3, a.image_size, a.image_size, generator=gen).to(a.device)
            synchronize(a)
            start = time.perf_counter()
            model(x)
            synchronize(a)
            over_cap = a.cap_s > 0 and time.perf_counter() - start > a.cap_s
            for _ in range(a.warmup - 1):
                model(x)
            synchronize(a)
            times = []
            for _ in range(a.iters):  # latency is per call: each call waited for
                start = time.perf_counter()
                model(x)
                synchronize(a)
                times.append((time.perf_counter() - start) * 1e3)
            times.sort()
            avg = sum(times) / len(times)
            pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]  # noqa: E731
            print(f"infer {batch} avg_ms {avg:.6f}")
            print(f"infer {batch} p95_ms {pick(0.95):.6f}")
            print(f"infer {batch} p99_ms {pick(0.99):.6f}")
            print(f"infer {batch} img_s {batch * 1e3 / avg:.6f}")
            if over_cap:  # as ember's list: the larger batches would take longer still
                break


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--layers", type=ints, default=[3, 4, 6, 3])
    p.add_argument("--widths", type=ints, default=[128, 256, 512, 1024])
    p.add_argument("--stem-channels", type=int, default=64)
    p.add_argument("--expansion", type=int, default=2)
    p.add_argument("--groups", type=int, default=32)
    p.add_argument("--se-squeeze", type=int, default=16, help="0: no squeeze-excitation")
    p.add_argument("--stem", choices=["imagenet", "cifar"], default="imagenet")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--image-size", type=int, default=224)
    sub = p.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("train")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--iters", type=int, default=5)
    t.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    i = sub.add_parser("infer")
    i.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    i.add_argument("--warmup", type=int, default=3)
    i.add_argument("--iters", type=int, default=20)
    i.add_argument("--cap-s", type=float, default=0, help="stop after a batch whose first call takes longer")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest algorithm per layer shape
    model = ResNet(a).to(a.device)
    train(model, a) if a.mode == "train" else infer(model, a)


if __name__ == "__main__":
    main()
