"""pytorch-metric-learning 2.8.1's losses written plainly in PyTorch: whole B x B (or B x C)
matrices and masks, as PML computes them, without importing PML. The one Python reference for
ember's metric losses: tests/data/make_fixtures.py writes the op table's fixtures with it and
apps/bench/torch_losses.py times it as `ember bench losses`' peer.

    import pml_formulas as pml
    loss = pml.ntxent(embeddings, labels, temperature=0.07)   # 0-d, differentiable
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

INF = math.inf


def pair_masks(labels):
    """(positive, negative) pair masks: same label and i != j; different labels."""
    same = labels[:, None] == labels[None, :]
    return same & ~torch.eye(len(labels), dtype=torch.bool, device=labels.device), ~same


def zero(x):
    """A 0 that is still a function of x: exactly-zero gradients, no NaN."""
    return (x * 0).sum()


def avg_nonzero(terms, x):
    """AvgNonZeroReducer: the mean of the terms > 0, or 0 (with zero gradients) when none are."""
    nonzero = terms[terms > 0]
    return nonzero.mean() if len(nonzero) > 0 else zero(x)


def l2_distances(x):
    """LpDistance: torch.cdist of the L2-normalised rows (its gradient at d = 0 is 0)."""
    e = F.normalize(x, p=2, dim=1)
    return torch.cdist(e, e, p=2)


def ntxent(x, labels, temperature=0.07):
    """NTXentLoss: per positive pair (i, j), -log(softmax over itself and the negatives of i
    + small_val), mean over positive pairs; 0 without a positive or a negative pair."""
    e = F.normalize(x, p=2, dim=1)
    s = e @ e.T / temperature
    pos, neg = pair_masks(labels)
    a, p = pos.nonzero(as_tuple=True)
    if len(a) == 0 or not neg.any():
        return zero(x)
    pos_s = s[a, p][:, None]
    neg_s = s[a].masked_fill(~neg[a], -INF)
    m = torch.maximum(pos_s, neg_s.max(1, keepdim=True).values).detach()
    numerator = torch.exp(pos_s - m)[:, 0]
    denominator = torch.exp(neg_s - m).sum(1) + numerator
    return -torch.log(numerator / denominator + torch.finfo(x.dtype).tiny).mean()


def supcon(x, labels, temperature=0.1):
    """SupConLoss: s / t shifted by its row max, log_prob against every j != i, per anchor the
    mean over its positives of -log_prob (divided by P_i + small_val), then the mean of the
    anchor losses > 0 (AvgNonZeroReducer); 0 without a positive or a negative pair."""
    e = F.normalize(x, p=2, dim=1)
    s = e @ e.T / temperature
    pos, neg = pair_masks(labels)
    if not pos.any() or not neg.any():
        return zero(x)
    s = s - s.max(1, keepdim=True).values.detach()
    log_prob = s - torch.logsumexp(s.masked_fill(~(pos | neg), torch.finfo(x.dtype).min), 1, keepdim=True)
    pos = pos.to(x.dtype)  # PML's float mask: an anchor without positives is 0 / small_val = 0
    anchor = -(pos * log_prob).sum(1) / (pos.sum(1) + torch.finfo(x.dtype).tiny)
    kept = anchor[anchor > 0]
    return kept.mean() if len(kept) > 0 else zero(x)


def multi_similarity(x, labels, alpha=2.0, beta=50.0, base=0.5):
    """MultiSimilarityLoss: per row, (1/alpha) logsumexp over its positives of alpha (base - s)
    and (1/beta) over its negatives of beta (s - base), each with an added 0 (add_one) and 0
    for an empty mask; mean over the rows."""
    e = F.normalize(x, p=2, dim=1)
    s = e @ e.T
    pos, neg = pair_masks(labels)

    def log_one_plus(v, mask):
        v = torch.cat([v.masked_fill(~mask, -INF), torch.zeros(len(v), 1, dtype=v.dtype, device=v.device)], 1)
        return torch.logsumexp(v, 1).masked_fill(~mask.any(1), 0)
    return (log_one_plus(alpha * (base - s), pos) / alpha + log_one_plus(beta * (s - base), neg) / beta).mean()


def contrastive(x, labels, pos_margin=0.0, neg_margin=1.0):
    """ContrastiveLoss: relu(d - pos_margin) over positive pairs, relu(neg_margin - d) over
    negative pairs, each averaged over its terms > 0, then added."""
    d = l2_distances(x)
    pos, neg = pair_masks(labels)
    return avg_nonzero(F.relu(d[pos] - pos_margin), x) + avg_nonzero(F.relu(neg_margin - d[neg]), x)


def triplet(x, labels, margin=0.05, triplets=None):
    """TripletMarginLoss: relu(d_ap - d_an + margin) averaged over the terms > 0, over every
    triplet (p a positive and n a negative of a) or over the given (anchor, positive, negative)."""
    d = l2_distances(x)
    if triplets is None:
        pos, neg = pair_masks(labels)
        triplets = torch.where(pos[:, :, None] & neg[:, None, :])
    a, p, n = triplets
    return avg_nonzero(F.relu(d[a, p] - d[a, n] + margin), x)


def batch_hard_triplets(x, labels):
    """BatchHardMiner: per anchor the farthest positive and the nearest negative (no gradient);
    anchors without either are dropped."""
    with torch.no_grad():
        d = l2_distances(x)
        pos, neg = pair_masks(labels)
        keep = pos.any(1) & neg.any(1)
        hardest_p = d.masked_fill(~pos, -INF).argmax(1)
        hardest_n = d.masked_fill(~neg, INF).argmin(1)
        a = torch.arange(len(labels), device=labels.device)[keep]
        return a, hardest_p[keep], hardest_n[keep]


def arcface(x, labels, W, margin_degrees=28.6, scale=64.0):
    """ArcFaceLoss: embeddings x (B, D) and W (D, C) as PML stores it, both normalised (W by
    columns); the target cosine becomes cos(theta + m) while theta <= pi - m, else
    cos(theta) - m sin(m) (theta = acos(clamp(cos, -1, 1))); mean cross-entropy of scale * logits."""
    m = np.radians(margin_degrees)
    cosine = F.normalize(x, p=2, dim=1) @ F.normalize(W.t(), p=2, dim=1).t()
    mask = F.one_hot(labels, W.shape[1]).to(x.dtype)
    target = cosine[mask == 1]
    angles = torch.acos(torch.clamp(target, -1, 1))
    modified = torch.where(angles <= np.deg2rad(180) - m, torch.cos(angles + m), torch.cos(angles) - m * np.sin(m))
    logits = (cosine + mask * (modified - target).unsqueeze(1)) * scale
    return F.cross_entropy(logits, labels)


def logsumexp_add_one(x, keep_mask):
    """PML's lmu.logsumexp(x, keep_mask, add_one=True, dim=0)."""
    x = x.masked_fill(~keep_mask, torch.finfo(x.dtype).min)
    x = torch.cat([x, torch.zeros(1, x.size(1), dtype=x.dtype, device=x.device)], dim=0)
    out = torch.logsumexp(x, dim=0, keepdim=True)
    return out.masked_fill(~torch.any(keep_mask, dim=0, keepdim=True), 0)


def proxy_anchor(x, labels, proxies, margin=0.1, alpha=32.0):
    """ProxyAnchorLoss: per class, logsumexp with add_one over its members of alpha (margin - cos)
    and over the other rows of alpha (cos + margin); the first summed over classes and divided by
    the classes present, the second divided by C (DivisorReducer)."""
    cos = F.normalize(x, p=2, dim=1) @ F.normalize(proxies, p=2, dim=1).t()
    pos_mask = F.one_hot(labels, proxies.shape[0]).bool()
    present = int((pos_mask.sum(0) != 0).sum())
    pos = logsumexp_add_one(alpha * (margin - cos), pos_mask)
    neg = logsumexp_add_one(alpha * (cos + margin), ~pos_mask)
    return (pos.sum() / present if present else 0) + neg.sum() / proxies.shape[0]
