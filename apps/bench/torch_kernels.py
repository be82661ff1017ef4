#!/usr/bin/env python3
"""PyTorch's timings for the rows of apps/bench/bench_kernels_conv.cpp, printed as lines `name ms`.

    /usr/bin/python3 apps/bench/torch_kernels.py --threads 2 [--device cuda]

Same shapes, same timing method (torch_timing.py). The backward rows call the ATen kernels that
autograd calls (convolution_backward with one output selected, max_pool2d_with_indices_backward).
"""

import torch
import torch.nn.functional as F

from torch_timing import run_rows

def conv_backward(dy, x, w, mask):
    return torch.ops.aten.convolution_backward(dy, x, w, [w.shape[0]], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)


def rows():
    out = []
    x, w, b = torch.randn(2, 4, 64, 64), torch.randn(8, 4, 3, 3), torch.randn(8)
    dy = torch.randn(2, 8, 64, 64)
    out.append(("conv2d_forward_n2_c4to8_64x64_k3p1", lambda: F.conv2d(x, w, b, 1, 1)))
    out.append(("conv2d_input_grad_n2_c4to8_64x64_k3p1", lambda: conv_backward(dy, x, w, [True, False, False])))
    out.append(("conv2d_relu_forward_n2_c4to8_64x64_k3p1", lambda: F.relu(F.conv2d(x, w, b, 1, 1))))
    for n, cin, cout, hw in [(2, 4, 8, 32), (8, 32, 64, 128)]:
        xs, ws, dys = torch.randn(n, cin, hw, hw), torch.randn(cout, cin, 3, 3), torch.randn(n, cout, hw, hw)
        out.append((f"conv2d_weight_grad_n{n}_c{cin}to{cout}_{hw}x{hw}_k3p1",
                    lambda xs=xs, ws=ws, dys=dys: conv_backward(dys, xs, ws, [False, True, False])))
    for n, cin, cout, hw in [(64, 16, 32, 14), (8, 32, 64, 128)]:
        for dtype, tag in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
            xs, ws = torch.randn(n, cin, hw, hw).to(dtype), torch.randn(cout, cin, 3, 3).to(dtype)
            bs, dys = torch.randn(cout).to(dtype), torch.randn(n, cout, hw, hw).to(dtype)
            suffix = f"_n{n}_c{cin}to{cout}_{hw}x{hw}_k3p1_{tag}"
            out.append(("conv2d_relu_forward" + suffix, lambda xs=xs, ws=ws, bs=bs: F.relu(F.conv2d(xs, ws, bs, 1, 1))))
            out.append(("conv2d_input_grad" + suffix,
                        lambda xs=xs, ws=ws, dys=dys: conv_backward(dys, xs, ws, [True, False, False])))
            out.append(("conv2d_weight_grad" + suffix,
                        lambda xs=xs, ws=ws, dys=dys: conv_backward(dys, xs, ws, [False, True, False])))
    dyb = torch.randn(32, 128, 64, 64)
    out.append(("conv2d_bias_grad_n32_c128_64x64", lambda: dyb.sum((0, 2, 3))))
    yb = F.relu(torch.randn_like(dyb))
    out.append(("bias_relu_backward_n32_c128_64x64",
                lambda: torch.ops.aten.threshold_backward(dyb, yb, 0).sum((0, 2, 3))))
    xp = torch.randn(8, 64, 128, 128)
    yp, indices = F.max_pool2d(xp, 2, return_indices=True)
    dyp = torch.randn_like(yp)
    out.append(("max_pool2d_forward_8x64x128x128_k2", lambda: F.max_pool2d(xp, 2, return_indices=True)))
    out.append(("max_pool2d_backward_8x64x128x128_k2", lambda: torch.ops.aten.max_pool2d_with_indices_backward(
        dyp, xp, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)))
    return out


def main():
    run_rows(__doc__.splitlines()[0], rows)


if __name__ == "__main__":
    main()
