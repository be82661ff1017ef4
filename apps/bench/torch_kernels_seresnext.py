#!/usr/bin/env python3
"""PyTorch's timings for the rows of apps/bench/bench_kernels_seresnext.cpp, printed as lines `name ms`.

    /usr/bin/python3 apps/bench/torch_kernels_seresnext.py --threads 2 [--device cuda]

Same shapes, same timing method (torch_timing.py). The gradient rows call the ATen kernel that
autograd calls (convolution_backward with one output selected). The SE tail is PyTorch's
unfused relu(x * s + residual); its backward is what autograd runs for it (threshold_backward,
then the products and the sum over H, W).
"""

import torch
import torch.nn.functional as F

from torch_timing import run_rows

# (n, cin, cout, groups, hw, k, stride, pad): kLayers of bench_kernels_seresnext.cpp, same order.
LAYERS = [
    (8, 128, 128, 32, 56, 3, 1, 1), (8, 256, 256, 32, 28, 3, 1, 1), (8, 512, 512, 32, 14, 3, 1, 1),
    (8, 1024, 1024, 32, 7, 3, 1, 1), (8, 256, 128, 1, 56, 1, 1, 0), (8, 1024, 512, 1, 14, 1, 1, 0),
    (8, 3, 64, 1, 224, 7, 2, 3), (8, 256, 256, 32, 56, 3, 2, 1), (64, 32, 32, 32, 32, 3, 1, 1),
    (64, 64, 64, 32, 32, 3, 2, 1), (64, 128, 128, 32, 16, 3, 2, 1),
]


def rows():
    out = []
    for n, cin, cout, groups, hw, k, stride, pad in LAYERS:
        name = f"n{n}_c{cin}to{cout}_g{groups}_{hw}x{hw}_k{k}s{stride}p{pad}"
        x, w = torch.randn(n, cin, hw, hw), torch.randn(cout, cin // groups, k, k)
        dy = torch.randn_like(F.conv2d(x, w, None, stride, pad, 1, groups))

        def backward(mask, x=x, w=w, dy=dy, stride=stride, pad=pad, groups=groups):
            return torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False,
                                                       [0, 0], groups, mask)
        out.append((f"conv2d_forward_{name}", lambda x=x, w=w, s=stride, p=pad, g=groups: F.conv2d(x, w, None, s, p, 1, g)))
        out.append((f"conv2d_input_grad_{name}", lambda b=backward: b([True, False, False])))
        out.append((f"conv2d_weight_grad_{name}", lambda b=backward: b([False, True, False])))
    for shape in [(8, 256, 56, 56), (8, 1024, 14, 14)]:
        x, r, dy = torch.randn(shape), torch.randn(shape), torch.randn(shape)
        s = torch.randn(shape[0], shape[1], 1, 1)
        y = F.relu(x * s + r)
        dims = f"n{shape[0]}_c{shape[1]}_{shape[2]}x{shape[3]}"

        def tail_backward(x=x, s=s, y=y, dy=dy):
            gm = torch.ops.aten.threshold_backward(dy, y, 0)
            return gm * s, (gm * x).sum((2, 3)), gm
        out.append((f"scale_add_relu_forward_{dims}", lambda x=x, s=s, r=r: F.relu(x * s + r)))
        out.append((f"scale_add_relu_backward_{dims}", tail_backward))
    return out


def main():
    run_rows(__doc__.splitlines()[0], rows)


if __name__ == "__main__":
    main()
