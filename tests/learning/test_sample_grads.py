"""Per-sample clipped gradients in chunks equal the unchunked sum (the memory cap changes nothing)."""
import torch
from torch import nn

from otafl_sdr.learning.sample_grads import clipped_grad_sum, make_vmap_sample_grad


def _stacked(model, K):
    return [p.detach().unsqueeze(0).repeat(K, *([1] * p.dim())) + 0.01 * torch.randn(K, *p.shape)
            for p in model.parameters()]


def test_chunked_clipped_sum_equals_one_batch_and_keeps_every_sample_within_the_clip():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(108, 4))
    K, B = 3, 10
    params = _stacked(model, K)
    xb, yb = torch.randn(K, B, 64), torch.randint(0, 4, (K, B))
    xb[1, 4] *= 1e4                                               # one huge sample: clipped like the rest
    wb = torch.ones(K, B) / B
    f = make_vmap_sample_grad(model)
    whole, loss_whole = clipped_grad_sum(f, params, xb, yb, wb, clip=0.5)
    n_params = sum(p[0].numel() for p in params)
    chunked, loss_chunked = clipped_grad_sum(f, params, xb, yb, wb, clip=0.5, max_bytes=K * n_params * 4 * 3)
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(loss_whole, loss_chunked)
    norm = torch.sqrt(sum(g.reshape(K, -1).pow(2).sum(1) for g in whole))
    assert bool((norm <= 0.5 + 1e-5).all())                       # mean of clipped samples: within the clip
    assert bool((norm > 0).all())
