#!/usr/bin/env python3
"""PyTorch's side of `ember bench mnist`: one epoch of mnist_cnn per batch size, printed as
lines `batch seconds accuracy`.

    /usr/bin/python3 apps/bench/torch_mnist.py --data data/mnist --threads 2 --batch-sizes 32,64

The same recipe as ember's side: mnist_cnn with PyTorch's default initialisation (ember uses
the same scheme), SGD lr 0.01 (no momentum), cross-entropy, the training set shuffled once per
epoch from a fixed seed, last partial batch dropped, images normalised with mean 0.1307 and
std 0.3081. Only the training epoch is timed; accuracy is on the 10k test images afterwards.
"""
import argparse
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        import gzip
        data = gzip.open(path + ".gz").read()
    else:
        data = open(path, "rb").read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data, split):
    images = read_idx(os.path.join(data, f"{split}-images-idx3-ubyte"))
    labels = read_idx(os.path.join(data, f"{split}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    return x.unsqueeze(1).contiguous(), torch.from_numpy(labels.astype(np.int64))


def mnist_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/mnist")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--batch-sizes", default="32,64,128,256,512,1024")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x_train, y_train = load(args.data, "train")
    x_test, y_test = load(args.data, "t10k")
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        torch.manual_seed(0)
        model = mnist_cnn()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        order = torch.randperm(len(x_train))
        start = time.perf_counter()
        for i in range(len(x_train) // batch):
            idx = order[i * batch:(i + 1) * batch]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - start
        with torch.no_grad():
            correct = sum(int((model(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum())
                          for i in range(0, len(x_test), 1000))
        print(f"{batch} {seconds:.3f} {correct / len(x_test):.4f}", flush=True)


if __name__ == "__main__":
    main()
