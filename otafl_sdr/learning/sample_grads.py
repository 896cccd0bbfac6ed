"""Batched gradients of a torch model for every client at once (``torch.func``), outside the MLP fast path.

``make_vmap_grad``: the weighted mini-batch gradient per client (vmap over clients). ``make_vmap_sample_grad``
with ``clipped_grad_sum``: per-sample gradients clipped in L2 to ``clip`` (the per-sample bound of DP-SGD,
paper 002 Alg. 1 / sample-level privacy) and summed; a non-finite per-sample gradient is clipped to ZERO.
Samples go through in chunks so the (K, chunk, P) per-sample gradients stay within ``SAMPLE_GRAD_BYTES``
(ResNet-18 at batch 1024 would otherwise ask for about 193 GB); clipping is per sample, so the chunked sum
equals the unchunked one."""
from __future__ import annotations

import torch
import torch.nn.functional as F

CLIP_EPS = 1e-6                    # as torch.nn.utils.clip_grad_norm_
SAMPLE_GRAD_BYTES = 1 << 30        # memory cap of one chunk of per-sample gradients


def zero_rows(t: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """t (K, B, ...) with the samples where ``ok`` (K, B) is False set to exactly 0 (not 0 * NaN)."""
    return torch.where(ok.view(*ok.shape, *([1] * (t.dim() - 2))), t, torch.zeros((), dtype=t.dtype, device=t.device))


def make_vmap_grad(model):
    """f(plist, xb, yb, wb) -> (gradients of sum_b w_b loss_b per client, losses): vmap over clients."""
    from torch.func import functional_call, grad, vmap
    names = [n for n, _ in model.named_parameters()]

    def loss_fn(plist, xb, yb, wb):
        out = functional_call(model, dict(zip(names, plist)), (xb,))
        losses = F.cross_entropy(out, yb, reduction="none")
        return (losses * wb).sum(), losses.detach()

    return vmap(grad(loss_fn, has_aux=True))


def make_vmap_sample_grad(model):
    """Per-sample gradients (K, B, *shape) of the cross-entropy: vmap over clients of vmap over samples."""
    from torch.func import functional_call, grad, vmap
    names = [n for n, _ in model.named_parameters()]

    def one(plist, x, y):
        out = functional_call(model, dict(zip(names, plist)), (x.unsqueeze(0),))
        loss = F.cross_entropy(out, y.unsqueeze(0))
        return loss, loss.detach()

    return vmap(vmap(grad(one, has_aux=True), in_dims=(None, 0, 0)))


def _clipped_chunk(sample_grad, params, xb, yb, wb, clip: float):
    g, losses = sample_grad(list(params), xb, yb)
    Kc, B = yb.shape
    sq = sum(x.reshape(Kc, B, -1).pow(2).sum(-1) for x in g)
    coef = torch.clamp(clip / (torch.sqrt(sq) + CLIP_EPS), max=1.0) * wb
    per = [x * coef.view(Kc, B, *([1] * (x.dim() - 2))) for x in g]
    fin = torch.isfinite(sq) & torch.isfinite(coef)                   # NaN/inf per-sample gradient: clipped to 0
    if not bool(fin.all()):
        per, losses = [zero_rows(x, fin) for x in per], zero_rows(losses, fin)
    return [x.sum(1) for x in per], losses


def clipped_grad_sum(sample_grad, params, xb, yb, wb, clip: float, max_bytes: int = SAMPLE_GRAD_BYTES):
    """(per client: sum_b w_b clip_C(g_b), losses (K, B)) with g_b each sample's gradient, chunked over b."""
    Kc, B = yb.shape
    n_params = sum(p[0].numel() for p in params)                       # params are stacked (K, ...)
    chunk = max(1, int(max_bytes // max(Kc * n_params * 4, 1)))
    if chunk >= B:
        return _clipped_chunk(sample_grad, params, xb, yb, wb, clip)
    parts = [_clipped_chunk(sample_grad, params, xb[:, i:i + chunk], yb[:, i:i + chunk], wb[:, i:i + chunk], clip)
             for i in range(0, B, chunk)]
    grads = [sum(p[0][j] for p in parts) for j in range(len(parts[0][0]))]
    return grads, torch.cat([p[1] for p in parts], dim=1)
