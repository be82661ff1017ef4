"""Timing shared by the PyTorch peer scripts, by the method of ember's bench::median_ms
(apps/bench/timing.h): at least one call and 50 ms of warm-up calls, one more call sizes blocks
of about 20 ms, and the median block is reported in milliseconds per call.

    import torch_timing
    torch_timing.use_cuda()          # on a GPU: tensors made there, blocks end with a synchronisation
    ms = torch_timing.median_ms(lambda: F.relu(x))
"""
import time

BLOCKS = 7
BLOCK_SECONDS = 0.02
WARMUP_SECONDS = 0.05

_sync = lambda: None  # noqa: E731


def use_cuda():
    """New tensors go to the GPU; blocks end with a synchronisation."""
    global _sync
    import torch
    if hasattr(torch, "set_default_device"):  # torch >= 2.0
        torch.set_default_device("cuda")
    else:
        torch.set_default_tensor_type(torch.cuda.FloatTensor)
    _sync = torch.cuda.synchronize


def median_ms(fn):
    start = time.perf_counter()
    fn()
    _sync()
    while time.perf_counter() - start < WARMUP_SECONDS:
        fn()
        _sync()
    start = time.perf_counter()
    fn()
    _sync()
    calls = max(1, int(BLOCK_SECONDS / max(time.perf_counter() - start, 1e-7)))
    per_call = []
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync()
        per_call.append((time.perf_counter() - start) / calls * 1e3)
    return sorted(per_call)[BLOCKS // 2]


def run_rows(description, rows):
    """The main() of a `name ms` peer script: --threads and --device flags, then each row of
    rows() (a list of (name, fn)) timed by median_ms without autograd, one line each."""
    import argparse
    import torch
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        use_cuda()
    with torch.no_grad():
        for name, fn in rows():
            print(f"{name} {median_ms(fn):.4f}", flush=True)
