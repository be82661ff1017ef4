"""What PyTorch + pytorch-metric-learning 2.8.1 do with a non-finite embedding row: the facts
tests/losses/test_metric_nonfinite.cpp checks ember against (Note [Non-finite embeddings] in
ops/metric_rules.h). Runs PML itself, not a rewrite; it is not installed here, so point Python
at its source (stub modules for the scipy.stats, scipy.special and tqdm it imports unused):

    mkdir -p /tmp/pml /tmp/stubs/scipy /tmp/stubs/tqdm
    git -C /work/.mirror/KevinMusgrave+pytorch-metric-learning/repo archive HEAD \
        src/pytorch_metric_learning | tar -x -C /tmp/pml
    touch /tmp/stubs/scipy/__init__.py /tmp/stubs/scipy/stats.py /tmp/stubs/scipy/special.py
    echo 'def tqdm(x, *a, **k): return x' > /tmp/stubs/tqdm/__init__.py
    PYTHONPATH=/tmp/pml/src:/tmp/stubs /usr/bin/python3 tests/losses/pml_nonfinite_check.py

Prints, per loss and kind (none / NaN row / inf element), the loss and per embedding row
whether its gradient is all NaN (N) or finite (.), and whether it is 0 everywhere.
"""
import math, torch
from pytorch_metric_learning import losses, miners
torch.manual_seed(0)
B, D, C = 8, 5, 4
labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
base = torch.randn(B, D, dtype=torch.float64)
W = torch.randn(D, C, dtype=torch.float64)
P = torch.randn(C, D, dtype=torch.float64)

def make(kind, row=2):
    x = base.clone()
    if kind == 'nan': x[row] = float('nan')
    if kind == 'inf': x[row, 1] = float('inf')
    return x

def pattern(g):
    return ''.join('N' if torch.isnan(r).all() else ('.' if torch.isfinite(r).all() else 'm') for r in g)

def run(name, fn, kind):
    x = make(kind).requires_grad_()
    extra = []
    loss = fn(x)
    loss.backward()
    print(f"{name:14s} {kind:4s} loss={loss.item()!r:24s} grad rows={pattern(x.grad)} zero={bool((x.grad==0).all())}")

L = {
 'contrastive': lambda x: losses.ContrastiveLoss()(x, labels),
 'triplet': lambda x: losses.TripletMarginLoss()(x, labels),
 'batch_hard': lambda x: losses.TripletMarginLoss()(x, labels, miners.BatchHardMiner()(x, labels)),
 'ntxent': lambda x: losses.NTXentLoss()(x, labels),
 'supcon': lambda x: losses.SupConLoss()(x, labels),
 'ms': lambda x: losses.MultiSimilarityLoss()(x, labels),
}
for k in ['none', 'nan', 'inf']:
    for n, f in L.items(): run(n, f, k)
    for n in ['arcface', 'proxyanchor']:
        x = make(k).requires_grad_()
        if n == 'arcface':
            l = losses.ArcFaceLoss(C, D); l.W.data = W.clone().float().double(); l = l.double()
        else:
            l = losses.ProxyAnchorLoss(C, D); l.proxies.data = P.clone(); l = l.double()
        loss = l(x, labels); loss.backward()
        w = l.W if n == 'arcface' else l.proxies
        print(f"{n:14s} {k:4s} loss={loss.item()!r:24s} grad rows={pattern(x.grad)} param nan={int(torch.isnan(w.grad).sum())}/{w.grad.numel()}")
x = make('nan')
print('miner', miners.BatchHardMiner()(x, labels))
print('miner finite', miners.BatchHardMiner()(base, labels))

# The special batches of the tests.
keep = torch.tensor([i for i in range(B) if i != 2])
x = base.clone(); x[2] = float('nan')
for L in [losses.ContrastiveLoss(), losses.TripletMarginLoss()]:
    print(type(L).__name__, L(x, labels).item(), L(base[keep], labels[keep]).item())
# no term passes: identical positives (d = 0), negatives 2 apart, plus a NaN row
e = torch.tensor([[1., 0], [1, 0], [-1, 0], [-1, 0], [float('nan'), 0]], dtype=torch.float64, requires_grad=True)
y = torch.tensor([0, 0, 1, 1, 0])
for L in [losses.ContrastiveLoss(), losses.TripletMarginLoss()]:
    e.grad = None; l = L(e, y); l.backward(); print('nopass', type(L).__name__, l.item(), e.grad.tolist())
# contrastive: the negative part passes, the positive part has no term (identical positives)
e2 = torch.tensor([[1., 0], [1, 0], [0.6, 0.8], [0.6, 0.8], [float('nan'), 0]], dtype=torch.float64, requires_grad=True)
l = losses.ContrastiveLoss()(e2, y); l.backward(); print('onepart', l.item(), e2.grad.tolist())
# finite version of the same: what ember must keep
e3 = e2.detach()[:4].clone().requires_grad_(); l = losses.ContrastiveLoss()(e3, y[:4]); l.backward(); print('onepart finite', l.item())
# NT-Xent without positive pairs + NaN row: zero_losses
e4 = torch.randn(4, 3, dtype=torch.float64); e4[1] = float('nan'); e4.requires_grad_()
l = losses.NTXentLoss()(e4, torch.tensor([0, 1, 2, 3])); l.backward(); print('ntxent nopos', l.item(), e4.grad.tolist())
# B = 30 (cdist's matmul path) contrastive pattern
xb = torch.randn(30, 5, dtype=torch.float64); xb[4] = float('nan'); xb.requires_grad_()
yb = torch.arange(30) % 7
l = losses.ContrastiveLoss()(xb, yb); l.backward(); print('B30', l.item(), bool(torch.isnan(xb.grad).all()))
l = losses.TripletMarginLoss()(xb, yb); xb.grad=None; l.backward(); print('B30 triplet', l.item(), bool(torch.isnan(xb.grad).all()))
